package integration

// Review 7: routing and reporting around node roles, lag and faults.
//
// Every test that changes a node's role or stops a node runs on its own
// cluster; objects are prefixed r7f_.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// r7fNodeCount runs a one-value integer query as the superuser on node.
func r7fNodeCount(t *testing.T, node *cluster.Node, sql string) int64 {
	t.Helper()
	return foNodeInt(t, node, sql)
}

// r7fRoutedLines returns the routing-log lines of one application name.
func r7fRoutedLines(t *testing.T, o *owl, app string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range o.logs.Entries(t) {
		if e[zerolog.MessageFieldName] == "routed" && e["application_name"] == app {
			out = append(out, e)
		}
	}
	return out
}

// r7fConnect opens a client with the given application name and exec mode.
func r7fConnect(t *testing.T, o *owl, app string, mode pgx.QueryExecMode) *client {
	t.Helper()
	return o.connect(t, func(cfg *pgx.ConnConfig) {
		cfg.DefaultQueryExecMode = mode
		cfg.RuntimeParams["application_name"] = app
	})
}

// r7fWaitWinner waits until route.Primary picks want as the one primary.
func r7fWaitWinner(t *testing.T, o *owl, want string) {
	t.Helper()
	o.waitSnapshot(t, 20*time.Second, want+" as the one primary writes go to", func(s *route.Snapshot) bool {
		i, err := route.Primary(s, route.Policy{DownAfter: foDownAfter}, time.Now())
		return err == nil && s.Nodes[i].Name == want
	})
}

// ---------------------------------------------------------------------------
// Pure routing: the lag threshold

// TestFailoverLagAtThreshold checks the boundary of the lag rule: a
// standby whose effective lag (lag plus sample age) is exactly the limit is
// "within" it; one millisecond more is REPLICA_LAG_EXCEEDED. The same holds
// for a session's own limit.
func TestFailoverLagAtThreshold(t *testing.T) {
	now := time.Now()
	snap := func(lag time.Duration) *route.Snapshot {
		return &route.Snapshot{TakenAt: now, Nodes: []route.NodeState{
			{Name: "pg1", Up: true, Role: route.RolePrimary, Timeline: 1, LagKnown: true, SampledAt: now.Add(-10 * time.Millisecond)},
			{Name: "pg2", Up: true, Role: route.RoleStandby, Timeline: 1, LagKnown: true, Lag: lag, SampledAt: now.Add(-100 * time.Millisecond)},
		}}
	}
	pol := route.Policy{MaxReplicaLag: time.Second, DownAfter: 500 * time.Millisecond}
	read := route.Request{Access: route.AccessRead, Reason: route.ReasonReadOnly, Subject: "SELECT"}

	dec, err := route.Decide(read, snap(900*time.Millisecond), pol, now)
	if err != nil || dec.Node != "pg2" || dec.Lag != time.Second {
		t.Errorf("effective lag exactly 1s under a 1s limit: %+v, %v; want pg2 with lag 1s", dec, err)
	}
	_, err = route.Decide(read, snap(901*time.Millisecond), pol, now)
	var rerr *route.Error
	if !errors.As(err, &rerr) || rerr.Code != route.ReplicaLagExceeded || rerr.SQLState != "57P03" {
		t.Errorf("effective lag 1.001s under a 1s limit: %v, want REPLICA_LAG_EXCEEDED 57P03", err)
	}

	session := read
	session.SessionMaxLag = 300 * time.Millisecond
	if dec, err := route.Decide(session, snap(200*time.Millisecond), pol, now); err != nil || dec.Node != "pg2" {
		t.Errorf("effective lag exactly the session's 300ms: %+v, %v; want pg2", dec, err)
	}
	if _, err := route.Decide(session, snap(201*time.Millisecond), pol, now); !errors.As(err, &rerr) || rerr.Code != route.ReplicaLagExceeded {
		t.Errorf("effective lag 301ms under the session's 300ms: %v, want REPLICA_LAG_EXCEEDED", err)
	}
}

// ---------------------------------------------------------------------------
// Split brain with sessions in every state

// TestFailoverSplitBrainSessions promotes the standby of a private
// cluster while the old primary keeps running, with clients in several
// states at the moment of the promotion:
//
//   - a session pinned to the old primary by a temporary table;
//   - a session pinned to the old primary by a session advisory lock;
//   - a read-write transaction open on the old primary;
//   - a BEGIN READ ONLY transaction open on the standby being promoted;
//   - an idle session with statements prepared over the extended protocol.
//
// Once pgowl's monitor has the promoted node on the higher timeline (after
// its CHECKPOINT), no write may reach the old primary: a pinned or
// transactional session must get an error rather than write there. It also
// checks the session-level lag override (SET ... = 0, SET LOCAL) before the
// promotion.
func TestFailoverSplitBrainSessions(t *testing.T) {
	c := ownCluster(t, 1)
	oldPrimary, newPrimary := c.Nodes[0], c.Nodes[1]
	o := startOwl(t, c, foConfig(nil))
	createTable(t, c, "r7f_items", "CREATE TABLE r7f_items (id int PRIMARY KEY, v text); INSERT INTO r7f_items VALUES (0, 'seed')")
	ctx := timeoutCtx(t, 3*time.Minute)

	t.Run("session_lag_override_zero_does_not_loosen", func(t *testing.T) {
		conn := r7fConnect(t, o, "r7f-lag", pgx.QueryExecModeSimpleProtocol)
		show := func() string {
			t.Helper()
			var v string
			if err := conn.QueryRow(ctx, "SHOW pgowl.max_replica_lag").Scan(&v); err != nil {
				t.Fatalf("SHOW pgowl.max_replica_lag: %v", err)
			}
			return v
		}
		if _, err := conn.Exec(ctx, "SET pgowl.max_replica_lag = '200ms'"); err != nil {
			t.Fatalf("SET '200ms': %v", err)
		}
		if got := show(); got != "200ms" {
			t.Fatalf("after SET '200ms': %q", got)
		}
		// 0 is tighter than 200ms: it must either be refused or applied;
		// quietly going back to the configured 1s loosens the limit, which
		// the documentation says is refused.
		_, err := conn.Exec(ctx, "SET pgowl.max_replica_lag = 0")
		got := show()
		if err == nil && got == foMaxLag.String() {
			t.Errorf("SET pgowl.max_replica_lag = 0 after '200ms' was accepted and SHOW now says %q: the session's limit was loosened from 200ms back to the configured %s", got, foMaxLag)
		} else {
			t.Logf("SET = 0 after '200ms': err=%v, SHOW %q", err, got)
		}
	})

	t.Run("set_local_lag_override_ends_with_transaction", func(t *testing.T) {
		conn := r7fConnect(t, o, "r7f-lag-local", pgx.QueryExecModeSimpleProtocol)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT count(*) FROM r7f_items"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL pgowl.max_replica_lag = '100ms'"); err != nil {
			t.Fatalf("SET LOCAL pgowl.max_replica_lag: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := conn.QueryRow(ctx, "SHOW pgowl.max_replica_lag").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != foMaxLag.String() {
			t.Errorf("after COMMIT of a transaction that ran SET LOCAL pgowl.max_replica_lag = '100ms', SHOW says %q, want the configured %s (SET LOCAL lasts until the end of the transaction)", v, foMaxLag)
		}
	})

	simple := pgx.QueryExecModeSimpleProtocol
	pinTemp := r7fConnect(t, o, "r7f-pin-temp", simple)
	pinLock := r7fConnect(t, o, "r7f-pin-lock", simple)
	txConn := r7fConnect(t, o, "r7f-tx", simple)
	roConn := r7fConnect(t, o, "r7f-ro", simple)
	prep := r7fConnect(t, o, "r7f-prep", pgx.QueryExecModeCacheStatement)
	listener := r7fConnect(t, o, "r7f-listen", simple)

	if _, err := pinTemp.Exec(ctx, "CREATE TEMP TABLE r7f_tmp (x int)"); err != nil {
		t.Fatalf("temp table: %v", err)
	}
	if r := pinTemp.oneRoute(t, "temp table"); r.Node != oldPrimary.Name {
		t.Fatalf("temp table created on %s, want %s", r.Node, oldPrimary.Name)
	}
	if _, err := pinLock.Exec(ctx, "SELECT pg_advisory_lock(7007)"); err != nil {
		t.Fatalf("advisory lock: %v", err)
	}
	if r := pinLock.oneRoute(t, "advisory lock"); r.Node != oldPrimary.Name {
		t.Fatalf("advisory lock taken on %s, want %s", r.Node, oldPrimary.Name)
	}
	tx, err := txConn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO r7f_items VALUES (1, 'tx before promotion')"); err != nil {
		t.Fatal(err)
	}
	for _, r := range txConn.routes(t) {
		if r.Node != oldPrimary.Name {
			t.Fatalf("write transaction began on %s, want %s", r.Node, oldPrimary.Name)
		}
	}
	roTx, err := roConn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := roTx.QueryRow(ctx, "SELECT count(*) FROM r7f_items").Scan(&n); err != nil {
		t.Fatal(err)
	}
	for _, r := range roConn.routes(t) {
		if r.Node != newPrimary.Name {
			t.Fatalf("read-only transaction began on %s, want the standby %s", r.Node, newPrimary.Name)
		}
	}
	const prepRead = "SELECT count(*) FROM r7f_items WHERE id >= $1"
	const prepWrite = "INSERT INTO r7f_items VALUES ($1, $2)"
	if err := prep.QueryRow(ctx, prepRead, 0).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := prep.Exec(ctx, prepWrite, 2, "prepared before"); err != nil {
		t.Fatal(err)
	}
	prep.routes(t)
	if _, err := listener.Exec(ctx, "LISTEN r7f_channel"); err != nil {
		t.Fatal(err)
	}
	if r := listener.oneRoute(t, "LISTEN"); r.Node != oldPrimary.Name {
		t.Fatalf("LISTEN ran on %s, want %s", r.Node, oldPrimary.Name)
	}
	listenerDone := make(chan error, 1)
	go func() {
		_, err := listener.WaitForNotification(timeoutCtx(t, time.Minute))
		listenerDone <- err
	}()
	catchUp(t, c)

	if err := newPrimary.Promote(ctx); err != nil {
		t.Fatalf("promote %s: %v", newPrimary.Name, err)
	}
	if err := newPrimary.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatalf("CHECKPOINT on %s: %v", newPrimary.Name, err)
	}
	r7fWaitWinner(t, o, newPrimary.Name)
	t.Logf("split brain seen: %s", foTimelines(o.states.Snapshot()))

	t.Run("idle_listener_told", func(t *testing.T) {
		// Notifications now go through the new primary: a client left
		// listening on the stale one would wait for ever.
		select {
		case err := <-listenerDone:
			pgErr, ok := asPgError(err)
			if !ok || pgErr.Severity != "FATAL" || pgErr.Code != "57P01" {
				t.Fatalf("the idle listener got %v, want a FATAL 57P01 from pgowl", err)
			}
			t.Logf("idle listener told: %s", pgErr.Message)
		case <-time.After(10 * time.Second):
			t.Fatalf("the client listening on %s was not told that %s is the primary now", oldPrimary.Name, newPrimary.Name)
		}
	})

	t.Run("show_nodes_in_split_brain", func(t *testing.T) {
		plain := r7fConnect(t, o, "r7f-show", simple)
		nodes := foShowNodes(t, ctx, plain)
		t.Logf("SHOW pgowl.nodes in the split brain: %v", nodes)
		if r := nodes[newPrimary.Name]; r == nil || r["role"] != "primary" || r["state"] != "up" || r["timeline"] == "1" {
			t.Errorf("%s after its promotion and checkpoint: %v, want role primary, state up, timeline above 1", newPrimary.Name, r)
		}
	})

	t.Run("idle_prepared_session", func(t *testing.T) {
		if _, err := prep.Exec(ctx, prepWrite, 3, "prepared after"); err != nil {
			t.Fatalf("prepared write after the promotion: %v", err)
		}
		r := prep.oneRoute(t, "prepared write after the promotion")
		if r.Node != newPrimary.Name || r.Role != "primary" {
			t.Errorf("prepared write after the promotion: NOTICE %v, want %s (primary)", r, newPrimary.Name)
		}
		if got := r7fNodeCount(t, newPrimary, "SELECT count(*) FROM r7f_items WHERE id = 3"); got != 1 {
			t.Errorf("the prepared write's row is not on %s", newPrimary.Name)
		}
		if got := r7fNodeCount(t, oldPrimary, "SELECT count(*) FROM r7f_items WHERE id = 3"); got != 0 {
			t.Errorf("the prepared write's row reached the stale primary %s", oldPrimary.Name)
		}
		err := prep.QueryRow(ctx, prepRead, 0).Scan(&n)
		rs := prep.routes(t)
		if err == nil {
			t.Errorf("prepared read in the split brain (no standby left) ran: %v", rs)
		} else {
			foWantRefusal(t, "prepared read in the split brain", err, "NO_READABLE_REPLICA", c.Nodes)
		}
		if prep.PgConn().IsClosed() {
			t.Fatalf("the refused read closed the connection")
		}
		// The routing log names the node that ran the write.
		var last map[string]any
		foPoll(t, 5*time.Second, 50*time.Millisecond, "the prepared write's routing-log line", func() (bool, string) {
			for _, e := range r7fRoutedLines(t, o, "r7f-prep") {
				if e["outcome"] == "ok" && e["reason"] == "WRITE" {
					last = e
				}
			}
			return last != nil && last["node"] == newPrimary.Name, fmt.Sprint(last)
		})
	})

	t.Run("read_only_transaction_on_promoted_node", func(t *testing.T) {
		err := roTx.QueryRow(ctx, "SELECT count(*) FROM r7f_items").Scan(&n)
		rs := roConn.routes(t)
		if err != nil {
			t.Logf("read in the read-only transaction after its node was promoted: %v", err)
		} else {
			if len(rs) != 1 || rs[0].Node != newPrimary.Name {
				t.Errorf("read in the read-only transaction after the promotion: NOTICEs %v, want one naming %s", rs, newPrimary.Name)
			} else if rs[0].Role != "primary" {
				t.Errorf("read in the read-only transaction after %s was promoted: NOTICE %v says role=%s, but pgowl's monitor has %s as primary (the NOTICE names the role it had when the transaction began)",
					newPrimary.Name, rs[0], rs[0].Role, newPrimary.Name)
			}
		}
		_ = roTx.Rollback(ctx)
		roConn.routes(t)
	})

	t.Run("pinned_temp_table_session", func(t *testing.T) {
		foResetStats(t, oldPrimary)
		_, err := pinTemp.Exec(ctx, "INSERT INTO r7f_items VALUES (100, 'pinned temp-table session after the split brain')")
		rs := pinTemp.routes(t)
		onOld := r7fNodeCount(t, oldPrimary, "SELECT count(*) FROM r7f_items WHERE id = 100")
		if onOld != 0 {
			t.Errorf("a session pinned by a temporary table wrote to the stale primary %s after pgowl knew %s had taken over (err=%v, NOTICEs %v): want an error, since the pinned node is no longer the primary",
				oldPrimary.Name, newPrimary.Name, err, rs)
		} else {
			t.Logf("pinned temp-table session's write: err=%v NOTICEs=%v", err, rs)
		}
		if pinTemp.PgConn().IsClosed() {
			t.Errorf("the pinned session's connection was closed")
		}
	})

	t.Run("pinned_advisory_lock_session", func(t *testing.T) {
		_, err := pinLock.Exec(ctx, "INSERT INTO r7f_items VALUES (101, 'pinned advisory-lock session after the split brain')")
		rs := pinLock.routes(t)
		if got := r7fNodeCount(t, oldPrimary, "SELECT count(*) FROM r7f_items WHERE id = 101"); got != 0 {
			t.Errorf("a session pinned by a session advisory lock wrote to the stale primary %s after pgowl knew %s had taken over (err=%v, NOTICEs %v)",
				oldPrimary.Name, newPrimary.Name, err, rs)
		} else {
			t.Logf("pinned advisory-lock session's write: err=%v NOTICEs=%v", err, rs)
		}
	})

	t.Run("write_transaction_open_across_promotion", func(t *testing.T) {
		_, err := tx.Exec(ctx, "INSERT INTO r7f_items VALUES (102, 'tx after the split brain')")
		commitErr := error(nil)
		if err == nil {
			commitErr = tx.Commit(ctx)
		} else {
			_ = tx.Rollback(ctx)
		}
		rs := txConn.routes(t)
		got := r7fNodeCount(t, oldPrimary, "SELECT count(*) FROM r7f_items WHERE id IN (1, 102)")
		if got != 0 {
			t.Errorf("a transaction open on %s when %s was promoted went on writing there and COMMIT succeeded (insert err=%v, commit err=%v, NOTICEs %v): %d row(s) now exist only on the stale primary; want the transaction to fail once pgowl knows %s is not the primary",
				oldPrimary.Name, newPrimary.Name, err, commitErr, rs, got, oldPrimary.Name)
		} else {
			t.Logf("transaction across the promotion: insert err=%v commit err=%v NOTICEs=%v", err, commitErr, rs)
		}
		// The session goes on, on the current roles.
		if _, err := txConn.Exec(ctx, "INSERT INTO r7f_items VALUES (103, 'after')"); err != nil {
			t.Errorf("write after the transaction: %v", err)
		} else if r := txConn.oneRoute(t, "write after the transaction"); r.Node != newPrimary.Name {
			t.Errorf("write after the transaction ran on %s, want %s", r.Node, newPrimary.Name)
		}
	})

	// Whatever the sessions did, the stale primary ran no client statement
	// that writes after the split brain was seen (monitor polls excluded).
	for _, s := range foClientStatements(t, oldPrimary) {
		if strings.Contains(strings.ToUpper(s), "INSERT") {
			t.Errorf("the stale primary %s ran a write after the split brain: %s", oldPrimary.Name, s)
		}
	}
}

// ---------------------------------------------------------------------------
// A standby cut off from its primary, and a failover to a node that is behind

// r7fDisconnectReceiver points a standby's primary_conninfo at a closed port
// and waits until it no longer streams.
func r7fDisconnectReceiver(t *testing.T, ctx context.Context, n *cluster.Node) {
	t.Helper()
	for _, sql := range []string{
		"ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1 user=postgres connect_timeout=2'",
		"SELECT pg_reload_conf()",
	} {
		if err := n.Exec(ctx, sql); err != nil {
			t.Fatalf("%s on %s: %v", sql, n.Name, err)
		}
	}
	foPoll(t, 20*time.Second, 100*time.Millisecond, n.Name+"'s WAL receiver gone", func() (bool, string) {
		k := r7fNodeCount(t, n, "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'")
		return k == 0, fmt.Sprintf("%d streaming receiver(s)", k)
	})
}

// TestFailoverReceiverDisconnectedAndBehindPromotion uses a private
// cluster (pg1 primary, pg2 and pg3 standbys):
//
//  1. pg2's WAL receiver is cut off (primary_conninfo to a closed port) while
//     it stays up; the primary writes one row. An instance that knows only
//     pg1 and pg2 must stop serving reads from pg2 once the row is older than
//     the lag limit (plus one monitor interval and a margin).
//  2. A session pinned by LISTEN on pg1, and one with prepared statements.
//  3. pg1 writes more rows, which pg3 replays and pg2 never receives; pg1
//     stops and pg2 (behind pg3) is promoted. pg3 now holds rows the new
//     primary does not have, on a history the new primary left: it cannot
//     follow pg2, and reads must not be served from it (they must neither see
//     the lost rows nor miss pg2's new writes beyond the lag limit).
func TestFailoverReceiverDisconnectedAndBehindPromotion(t *testing.T) {
	c := ownCluster(t, 2)
	pg1, pg2, pg3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	createTable(t, c, "r7f_rx", "CREATE TABLE r7f_rx (id int PRIMARY KEY)")
	createTable(t, c, "r7f_lost", "CREATE TABLE r7f_lost (id int PRIMARY KEY)")
	all := startOwl(t, c, foConfig(nil))
	pair := foStartOwlOn(t, c, []string{pg1.Name, pg2.Name}, nil)
	ctx := timeoutCtx(t, 4*time.Minute)
	simple := pgx.QueryExecModeSimpleProtocol

	t.Run("receiver_disconnected_standby", func(t *testing.T) {
		conn := r7fConnect(t, pair, "r7f-rx", simple)
		var n int64
		conn.foMustRead(t, ctx, "read before the disconnect", "SELECT count(*) FROM r7f_rx", &n)
		r7fDisconnectReceiver(t, ctx, pg2)
		// With an idle primary the cut-off standby has all its data: reads go on.
		res := conn.foTryRead(t, ctx, "SELECT count(*) FROM r7f_rx", &n)
		t.Logf("read with the receiver cut off and an idle primary: %s", res.describe())

		if err := pg1.Exec(ctx, "SET synchronous_commit = on; INSERT INTO r7f_rx VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		written := time.Now()
		bound := foMaxLag + foInterval + 150*time.Millisecond
		var refused foResult
		served := 0
		foPoll(t, 10*time.Second, 25*time.Millisecond, "a read refused while "+pg2.Name+" cannot receive WAL", func() (bool, string) {
			res := conn.foTryRead(t, ctx, "SELECT count(*) FROM r7f_rx", &n)
			switch {
			case res.err == nil:
				served++
				if n == 0 && res.end.Sub(written) > bound {
					t.Errorf("a read %s after the write (bound %s) was served by %s without the row (NOTICE %v)",
						res.end.Sub(written).Round(time.Millisecond), bound, res.route.Node, res.route)
				}
				return false, res.describe()
			case res.owlError("REPLICA_LAG_EXCEEDED"):
				refused = res
				return true, ""
			default:
				t.Errorf("unexpected: %s", res.describe())
				return false, res.describe()
			}
		})
		t.Logf("reads refused %s after the write (%d served before)", refused.start.Sub(written).Round(time.Millisecond), served)
		if line := foDetailLine(refused.pgErr, pg2.Name); !strings.Contains(line, "exceeds limit") {
			t.Errorf("DETAIL line of %s: %q, want it to say the lag exceeds the limit", pg2.Name, line)
		}
		row := foShowNodes(t, ctx, conn)[pg2.Name]
		t.Logf("SHOW pgowl.nodes row of the cut-off standby: %v", row)
		if row == nil || row["state"] != "up" || row["role"] != "standby" {
			t.Errorf("SHOW pgowl.nodes row of the cut-off standby: %v, want an up standby", row)
		}
	})

	listen := r7fConnect(t, all, "r7f-listen", simple)
	if _, err := listen.Exec(ctx, "LISTEN r7f_chan"); err != nil {
		t.Fatalf("LISTEN: %v", err)
	}
	if r := listen.oneRoute(t, "LISTEN"); r.Node != pg1.Name {
		t.Fatalf("LISTEN ran on %s, want %s", r.Node, pg1.Name)
	}
	prep := r7fConnect(t, all, "r7f-prep2", pgx.QueryExecModeCacheStatement)
	if _, err := prep.Exec(ctx, "INSERT INTO r7f_rx VALUES ($1)", 2); err != nil {
		t.Fatalf("prepared write before the failover: %v", err)
	}
	prep.routes(t)

	// Rows only pg3 will have.
	if err := pg1.Exec(ctx, "INSERT INTO r7f_lost SELECT generate_series(1, 2000)"); err != nil {
		t.Fatal(err)
	}
	if err := pg3.WaitCaughtUp(ctx, pg1); err != nil {
		t.Fatalf("%s catching up: %v", pg3.Name, err)
	}
	if err := pg1.Stop(ctx); err != nil {
		t.Fatalf("stop %s: %v", pg1.Name, err)
	}
	if err := pg2.Promote(ctx); err != nil {
		t.Fatalf("promote %s: %v", pg2.Name, err)
	}
	if err := pg2.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatalf("CHECKPOINT on %s: %v", pg2.Name, err)
	}
	r7fWaitWinner(t, all, pg2.Name)
	if got := r7fNodeCount(t, pg2, "SELECT count(*) FROM r7f_lost"); got != 0 {
		t.Fatalf("setup: the promoted %s has %d rows of r7f_lost, want 0 (it was cut off before they were written)", pg2.Name, got)
	}
	if got := r7fNodeCount(t, pg3, "SELECT count(*) FROM r7f_lost"); got != 2000 {
		t.Fatalf("setup: %s has %d rows of r7f_lost, want 2000", pg3.Name, got)
	}
	t.Logf("after the failover: %s", describeSnapshot(all.states.Snapshot()))

	t.Run("listen_pinned_session_after_its_node_stopped", func(t *testing.T) {
		// The session sat idle in LISTEN when its node stopped: pgowl told it
		// at once with a FATAL and closed the connection (what a direct
		// connection would see), so the client connects again.
		_, err := listen.Exec(ctx, "INSERT INTO r7f_rx VALUES (10)")
		if !listen.PgConn().IsClosed() {
			t.Fatalf("the idle LISTEN session on the stopped node %s is still open (statement err=%v): it would wait for notifications that no longer come", pg1.Name, err)
		}
		again := r7fConnect(t, all, "r7f-listen-again", simple)
		if _, err := again.Exec(ctx, "INSERT INTO r7f_rx VALUES (11)"); err != nil {
			t.Errorf("a new session's write: %v", err)
		} else if r := again.oneRoute(t, "next write"); r.Node != pg2.Name {
			t.Errorf("a new session's write ran on %s, want %s", r.Node, pg2.Name)
		}
	})

	t.Run("prepared_write_after_failover", func(t *testing.T) {
		if _, err := prep.Exec(ctx, "INSERT INTO r7f_rx VALUES ($1)", 12); err != nil {
			t.Fatalf("prepared write after the failover: %v", err)
		}
		if r := prep.oneRoute(t, "prepared write after the failover"); r.Node != pg2.Name {
			t.Errorf("prepared write after the failover ran on %s, want %s", r.Node, pg2.Name)
		}
	})

	t.Run("standby_ahead_of_new_primary_serves_no_reads", func(t *testing.T) {
		conn := r7fConnect(t, all, "r7f-diverged", simple)
		var n int64
		deadline := time.Now().Add(2 * time.Second)
		var servedLost []string
		for time.Now().Before(deadline) {
			res := conn.foTryRead(t, ctx, "SELECT count(*) FROM r7f_lost", &n)
			if res.err == nil && n != 0 {
				servedLost = append(servedLost, fmt.Sprintf("%d rows via %v", n, res.route))
			}
			time.Sleep(200 * time.Millisecond)
		}
		if len(servedLost) > 0 {
			t.Errorf("after %s was promoted without r7f_lost's 2000 rows, %d read(s) through pgowl still returned them from %s, which replayed past the new primary's fork and can never follow it; first: %s",
				pg2.Name, len(servedLost), pg3.Name, servedLost[0])
		}

		// A write on the new primary must be visible to reads served after the lag limit.
		if _, err := conn.Exec(ctx, "INSERT INTO r7f_lost VALUES (-1)"); err != nil {
			t.Fatalf("write on the new primary: %v", err)
		}
		if r := conn.oneRoute(t, "write"); r.Node != pg2.Name {
			t.Errorf("write ran on %s, want %s", r.Node, pg2.Name)
		}
		wrote := time.Now()
		time.Sleep(foMaxLag + foInterval + 300*time.Millisecond)
		for i := range 3 {
			res := conn.foTryRead(t, ctx, "SELECT count(*) FROM r7f_lost WHERE id = -1", &n)
			if res.err == nil && n == 0 {
				t.Errorf("read %d, %s after a write to the new primary %s, was served by %s without it (NOTICE lag_ms %d): staler than routing.max_replica_lag %s",
					i+1, time.Since(wrote).Round(time.Millisecond), pg2.Name, res.route.Node, res.route.LagMS, foMaxLag)
			} else {
				t.Logf("read %d after the write: %s (n=%d)", i+1, res.describe(), n)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("SHOW pgowl.nodes: %v", foShowNodes(t, ctx, conn))
	})
}
