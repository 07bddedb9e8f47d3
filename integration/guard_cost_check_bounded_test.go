package integration

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// lockTable holds an ACCESS EXCLUSIVE lock on table, on node, in an open
// transaction of a direct session, until release (at the latest when t
// ends). Planning a statement that uses the table waits for it.
func lockTable(t *testing.T, node *cluster.Node, table string) (release func()) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	conn, err := node.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "BEGIN; LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatalf("lock %s on %s: %v", table, node.Name, err)
	}
	release = sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Exec(ctx, "ROLLBACK")
		conn.Close(ctx)
	})
	t.Cleanup(release)
	return release
}

// startLockedTableGuardOwl creates guard_locked (ten rows) and guard_lock_log
// on the shared cluster and starts pgowl with a cost guard on AI-comment
// statements, reads and writes, that explains every statement (no verdict
// cache), after mutate (which may be nil).
func startLockedTableGuardOwl(t *testing.T, mutate func(*config.Config)) (*owl, func(string) string) {
	t.Helper()
	c := sharedClusterFor(t)
	createTable(t, c, "guard_locked", `CREATE TABLE guard_locked (id int PRIMARY KEY, v text);
		INSERT INTO guard_locked SELECT g, 'initial' FROM generate_series(1, 10) g;
		ANALYZE guard_locked;`)
	createTable(t, c, "guard_lock_log", "CREATE TABLE guard_lock_log (id int)")
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Guards = []config.Guard{{Name: "analytics", Match: config.GuardMatch{AIComment: true}, MaxCost: guardCostLimit,
			GuardWrites: true}}
		if mutate != nil {
			mutate(cfg)
		}
	})
	prefix := o.cfg.Routing.AICommentPrefix
	return o, func(sql string) string { return prefix + " " + sql }
}

// guardLockedValues returns guard_locked's distinct values, read on the primary.
func guardLockedValues(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	var got string
	if err := c.Nodes[0].QueryRow(timeoutCtx(t, statementTimeout), "SELECT string_agg(DISTINCT v, ',') FROM guard_locked").Scan(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestGuardCostCheckBoundedByQueryTimeout: the cost check's EXPLAIN is
// bounded by limits.query_timeout, as the statement is. While another
// session holds an ACCESS EXCLUSIVE lock on the table, planning a guarded
// UPDATE waits; at the limit pgowl cancels the EXPLAIN on the node and the
// client gets 57014 naming the limit and the cost check, with the simple and
// the extended protocol, outside and inside a transaction block (where the
// transaction fails as it would on the node). The statement does not run,
// nothing is left waiting on the node, the session goes on, and once the
// lock is released the guarded UPDATE is checked and runs.
func TestGuardCostCheckBoundedByQueryTimeout(t *testing.T) {
	const limit = time.Second
	o, ai := startLockedTableGuardOwl(t, func(cfg *config.Config) { cfg.Limits.QueryTimeout = limit })
	conn := o.connect(t, nil)
	pg := conn.PgConn()
	ctx := timeoutCtx(t, 4*statementTimeout)
	pg1 := o.nodes.Nodes[0].Name
	release := lockTable(t, o.nodes.Nodes[0], "guard_locked")

	wantCheckTimedOut := func(what string, run func() error) {
		t.Helper()
		start := time.Now()
		err := run()
		took := time.Since(start)
		pgErr := wantSQLState(t, what, err, "57014")
		if pgErr == nil {
			return
		}
		t.Logf("%s: after %s the client sees:\nERROR: %s\nDETAIL: %s\nHINT: %s", what, took.Round(time.Millisecond), pgErr.Message, pgErr.Detail, pgErr.Hint)
		wantMessage := "pgowl: canceling statement due to limits.query_timeout (1s): its cost check (EXPLAIN) on " + pg1 + " did not finish"
		if pgErr.Message != wantMessage {
			t.Errorf("%s: message %q, want %q", what, pgErr.Message, wantMessage)
		}
		wantDetail := "guard=analytics node=" + pg1 + " cost_check=cancelled query_timeout=1s node_error="
		if !strings.HasPrefix(pgErr.Detail, wantDetail) {
			t.Errorf("%s: DETAIL %q, want it to start with %q", what, pgErr.Detail, wantDetail)
		}
		if !strings.Contains(pgErr.Hint, "did not run") || !strings.Contains(pgErr.Hint, "lock") {
			t.Errorf("%s: HINT %q", what, pgErr.Hint)
		}
		if took < limit || took > limit+3*time.Second {
			t.Errorf("%s: refused after %s, want within %s of the %s limit", what, took, 3*time.Second, limit)
		}
		if left := sleepersOn(t, o, "guard_locked"); left[pg1] != 0 {
			t.Errorf("%s: %d statements on guard_locked still wait on %s", what, left[pg1], pg1)
		}
	}
	stillWorks := func(what string) {
		t.Helper()
		if got := queryInt(t, conn, what, "SELECT 7"); got != 7 {
			t.Errorf("%s: SELECT 7 returned %d", what, got)
		}
		conn.routes(t)
	}

	wantCheckTimedOut("simple protocol", func() error {
		_, err := pg.Exec(ctx, ai("UPDATE guard_locked SET v = 'ran' WHERE id = 1")).ReadAll()
		return err
	})
	var explain string
	if err := conn.QueryRow(ctx, "SHOW pgowl.explain").Scan(&explain); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(explain, "guard=analytics cost=unchecked cost_check=cancelled") || !strings.Contains(explain, "outcome=57014") {
		t.Errorf("SHOW pgowl.explain after the cancelled check of the UPDATE:\n%s", explain)
	}
	stillWorks("after the simple query's check was cancelled")

	wantCheckTimedOut("extended protocol, a parameter of unspecified type", func() error {
		return pg.ExecParams(ctx, ai("UPDATE guard_locked SET v = 'ran' WHERE id = $1"), [][]byte{[]byte("2")}, nil, nil, nil).Read().Err
	})
	stillWorks("after the extended query's check was cancelled")

	// Inside a transaction block the EXPLAIN runs under a savepoint; the
	// refusal fails the transaction, and its earlier write goes with it.
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO guard_lock_log VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	wantCheckTimedOut("in a transaction block", func() error {
		_, err := pg.Exec(ctx, ai("UPDATE guard_locked SET v = 'ran' WHERE id = 3")).ReadAll()
		return err
	})
	_, err := conn.Exec(ctx, "SELECT 1")
	wantSQLState(t, "the next statement of that transaction", err, "25P02")
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	stillWorks("after the transaction")
	if n := primaryInt(t, o.nodes, "SELECT count(*) FROM guard_lock_log"); n != 0 {
		t.Errorf("guard_lock_log has %d rows: the failed transaction's INSERT was committed", n)
	}

	release()
	if got := guardLockedValues(t, o.nodes); got != "initial" {
		t.Errorf("guard_locked's values are %q after the refusals, want \"initial\": a refused UPDATE ran", got)
	}
	_, err = pg.Exec(ctx, ai("UPDATE guard_locked SET v = 'ran' WHERE id = 4")).ReadAll()
	wantGuardedRun(t, "the guarded UPDATE once the lock is released", conn, err)
	if got := guardLockedValues(t, o.nodes); got != "initial,ran" {
		t.Errorf("guard_locked's values are %q, want \"initial,ran\"", got)
	}
}

// TestGuardCostCheckTakesCancelAndStatementTimeout: without
// limits.query_timeout, the cost check's EXPLAIN can still be cancelled as
// the statement could: by the client's cancel request, and by the session's
// own statement_timeout. The client gets 57014 with the node's reason, the
// statement does not run, and the session goes on.
func TestGuardCostCheckTakesCancelAndStatementTimeout(t *testing.T) {
	o, ai := startLockedTableGuardOwl(t, nil)
	conn := o.connect(t, nil)
	pg := conn.PgConn()
	ctx := timeoutCtx(t, 4*statementTimeout)
	pg1 := o.nodes.Nodes[0].Name
	release := lockTable(t, o.nodes.Nodes[0], "guard_locked")

	wantCheckCancelled := func(what, nodeMessage string, run func() error) {
		t.Helper()
		err := run()
		pgErr := wantSQLState(t, what, err, "57014")
		if pgErr == nil {
			return
		}
		t.Logf("%s: the client sees:\nERROR: %s\nDETAIL: %s\nHINT: %s", what, pgErr.Message, pgErr.Detail, pgErr.Hint)
		wantMessage := "pgowl: the cost check (EXPLAIN) of the statement was cancelled on " + pg1 + ": " + nodeMessage
		if pgErr.Message != wantMessage {
			t.Errorf("%s: message %q, want %q", what, pgErr.Message, wantMessage)
		}
		if !strings.HasPrefix(pgErr.Detail, "guard=analytics node="+pg1+" cost_check=cancelled node_error=") {
			t.Errorf("%s: DETAIL %q", what, pgErr.Detail)
		}
		if left := sleepersOn(t, o, "guard_locked"); left[pg1] != 0 {
			t.Errorf("%s: %d statements on guard_locked still wait on %s", what, left[pg1], pg1)
		}
		if got := queryInt(t, conn, what, "SELECT 7"); got != 7 {
			t.Errorf("%s: SELECT 7 returned %d", what, got)
		}
		conn.routes(t)
	}

	wantCheckCancelled("a cancel request", "canceling statement due to user request", func() error {
		cancelled := make(chan error, 1)
		go func() {
			// Once the EXPLAIN waits for the lock on the node.
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				var waiting int
				err := o.nodes.Nodes[0].QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND wait_event_type = 'Lock' AND query LIKE '%EXPLAIN%guard_locked%' AND pid <> pg_backend_pid()").Scan(&waiting)
				if err == nil && waiting > 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			cancelled <- pg.CancelRequest(ctx)
		}()
		_, err := pg.Exec(ctx, ai("UPDATE guard_locked SET v = 'ran' WHERE id = 1")).ReadAll()
		if cerr := <-cancelled; cerr != nil {
			t.Errorf("cancel request: %v", cerr)
		}
		return err
	})

	if _, err := conn.Exec(ctx, "SET statement_timeout = '500ms'"); err != nil {
		t.Fatal(err)
	}
	wantCheckCancelled("statement_timeout", "canceling statement due to statement timeout", func() error {
		return pg.ExecParams(ctx, ai("UPDATE guard_locked SET v = 'ran' WHERE id = $1"), [][]byte{[]byte("2")}, nil, nil, nil).Read().Err
	})
	if _, err := conn.Exec(ctx, "RESET statement_timeout"); err != nil {
		t.Fatal(err)
	}
	conn.routes(t)

	release()
	if got := guardLockedValues(t, o.nodes); got != "initial" {
		t.Errorf("guard_locked's values are %q after the refusals, want \"initial\": a refused UPDATE ran", got)
	}
	_, err := pg.Exec(ctx, ai("UPDATE guard_locked SET v = 'ran' WHERE id = 4")).ReadAll()
	wantGuardedRun(t, "the guarded UPDATE once the lock is released", conn, err)
}

// TestGuardCostCheckMovesOffAStoppedStandby: limits.first_reply_timeout
// bounds the cost check as it bounds a statement. A standby whose processes
// are SIGSTOPped still acknowledges TCP, so a guarded read's EXPLAIN sent
// there gets no reply; once it has waited first_reply_timeout and the
// monitor finds the standby unresponsive, the read is taken off it and runs,
// checked, on the other standby, within first_reply_timeout +
// monitor.down_after and a second.
func TestGuardCostCheckMovesOffAStoppedStandby(t *testing.T) {
	c := ownCluster(t, 2)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Routing.StandbyChoice = config.StandbyRoundRobin
		cfg.Limits.FirstReplyTimeout = time.Second
		cfg.Guards = []config.Guard{{Name: "analytics", Match: config.GuardMatch{AIComment: true}, MaxCost: guardCostLimit}}
	})
	ai := func(sql string) string { return o.cfg.Routing.AICommentPrefix + " " + sql }
	bound := o.cfg.Limits.FirstReplyTimeout + o.cfg.Monitor.DownAfter + time.Second
	stopped, healthy := c.Nodes[1], c.Nodes[2]
	const clients = 4
	var conns []*client
	for range clients {
		conns = append(conns, o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol)))
	}
	readPort := func(conn *client) (port string, took time.Duration, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		err = conn.QueryRow(ctx, ai("SELECT current_setting('port')")).Scan(&port)
		return port, time.Since(start), err
	}
	// Warm up: every client's reads reach both standbys' pooled connections.
	seen := map[string]bool{}
	for range 2 {
		for _, conn := range conns {
			port, _, err := readPort(conn)
			if err != nil {
				t.Fatalf("warm-up guarded read: %v", err)
			}
			seen[port] = true
			conn.routes(t)
		}
	}
	if !seen[strconv.Itoa(stopped.Port)] || !seen[strconv.Itoa(healthy.Port)] {
		t.Fatalf("warm-up reads did not reach both standbys: %v", seen)
	}

	// The postmaster first, so that it forks no backend the list misses.
	pids := nodeProcesses(t, stopped)
	signalNode(t, pids[:1], syscall.SIGSTOP)
	pids = nodeProcesses(t, stopped)
	signalNode(t, pids, syscall.SIGSTOP)
	t.Cleanup(func() { signalNode(t, nodeProcesses(t, stopped), syscall.SIGCONT) })
	// Every client reads until the monitor has surely found the standby
	// unresponsive: some reads are sent there before it does.
	until := time.Now().Add(o.cfg.Monitor.DownAfter + time.Second)
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 1000 && time.Now().Before(until); n++ {
				port, took, err := readPort(conn)
				switch {
				case err != nil:
					t.Errorf("client %d: guarded read after the stop: %v", i, err)
					return
				case port != strconv.Itoa(healthy.Port):
					t.Errorf("client %d: guarded read after the stop ran on port %s, want %s's %d", i, port, healthy.Name, healthy.Port)
				case took > bound:
					t.Errorf("client %d: guarded read after the stop took %s, longer than %s", i, took, bound)
				case took > o.cfg.Limits.FirstReplyTimeout:
					t.Logf("client %d: a guarded read waited on %s, then ran on %s after %s", i, stopped.Name, healthy.Name, took.Round(time.Millisecond))
				}
				for _, n := range conn.notices.take() {
					if isRouteNotice(n) && !guardedNotice.MatchString(n.Detail) {
						t.Errorf("client %d: NOTICE DETAIL %q, want the read's cost checked", i, n.Detail)
					}
				}
			}
		}()
	}
	wg.Wait()
	signalNode(t, pids, syscall.SIGCONT)
	if !strings.Contains(o.logs.String(), "within limits.first_reply_timeout; taking the statement off it") {
		t.Errorf("no guarded read waited on %s: the test did not reach the cost check's wait", stopped.Name)
	}
}
