package integration

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// loadHolders keeps sessions busy on a node, directly (not through pgowl),
// until release: they sleep, or wait on an advisory lock another holds.
type loadHolders struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  []*pgx.Conn
}

// holdLoad opens n sessions on node that run sql until released (at the
// latest when t ends); each may run setup first.
func holdLoad(t *testing.T, node *cluster.Node, setup string, n int, sql string) *loadHolders {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	h := &loadHolders{cancel: cancel}
	t.Cleanup(h.release)
	for i := 0; i < n; i++ {
		conn, err := node.Connect(timeoutCtx(t, statementTimeout))
		if err != nil {
			t.Fatal(err)
		}
		h.conns = append(h.conns, conn)
		if setup != "" {
			if _, err := conn.Exec(ctx, setup); err != nil {
				t.Fatalf("%s on %s: %v", setup, node.Name, err)
			}
		}
		if sql == "" {
			continue
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			conn.Exec(ctx, sql) // ends with an error when released
		}()
	}
	return h
}

// release ends the holders' statements and closes their sessions.
func (h *loadHolders) release() {
	h.cancel()
	h.wg.Wait()
	for _, c := range h.conns {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.Close(ctx)
		cancel()
	}
	h.conns = nil
}

// waitLoad waits until the monitor reads node's load as at least active
// active sessions and lockWaiting sessions waiting on a lock.
func waitLoad(t *testing.T, o *owl, node string, active, lockWaiting int) {
	t.Helper()
	o.waitSnapshot(t, 30*time.Second, fmt.Sprintf("%s with %d active, %d waiting on a lock", node, active, lockWaiting), func(s *route.Snapshot) bool {
		n := findNode(s, node)
		return n != nil && n.Load.Known && n.Load.Active >= active && n.Load.LockWaiting >= lockWaiting
	})
}

// TestGuardLoadMovesThenRefuses: a guard with busy.max_active keeps its reads
// off a standby with that many active sessions (sleeping ones), on the
// other standby; once that one is as busy (sessions waiting on a lock), the
// guard's reads get DATABASE_BUSY with the load in DETAIL, while business
// traffic keeps running. SHOW pgowl.nodes shows the load.
func TestGuardLoadMovesThenRefuses(t *testing.T) {
	c := sharedClusterFor(t)
	const limit = 3
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Guards = []config.Guard{{Name: "reports", Match: config.GuardMatch{ApplicationNames: []string{"report*"}},
			Busy: config.GuardBusy{MaxActive: limit}}}
	})
	reports := o.connect(t, withParams(map[string]string{"application_name": "report-weekly"}))
	shop := o.connect(t, withParams(map[string]string{"application_name": "shop"}))
	ctx := timeoutCtx(t, 2*time.Minute)
	pg2, pg3 := c.Nodes[1], c.Nodes[2]

	sleepers := holdLoad(t, pg2, "", limit, "SELECT pg_sleep(120)")
	waitLoad(t, o, pg2.Name, limit, 0)
	for i := 0; i < 5; i++ {
		var one int
		if err := reports.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("guarded read with %s busy: %v", pg2.Name, err)
		}
		r := reports.oneRoute(t, "guarded read")
		if r.Node != pg3.Name || !strings.Contains(r.Raw.Detail, " guard=reports") {
			t.Errorf("guarded read with %s busy: NOTICE %v %q, want %s and guard=reports", pg2.Name, r, r.Raw.Detail, pg3.Name)
		}
	}
	nodes := foShowNodes(t, ctx, shop)
	if row := nodes[pg2.Name]; atoiOr(row["active"], -1) < limit || atoiOr(row["max_connections"], -1) <= 0 {
		t.Errorf("SHOW pgowl.nodes row of %s: %v, want its load", pg2.Name, row)
	}
	shop.routes(t)

	// pg3: one session holds an advisory lock, the others wait for it.
	holder := holdLoad(t, pg3, "SELECT pg_advisory_lock(4242)", 1, "")
	waiters := holdLoad(t, pg3, "", limit, "SELECT pg_advisory_lock(4242)")
	waitLoad(t, o, pg3.Name, limit, limit)
	var one int
	err := reports.QueryRow(ctx, "SELECT 1").Scan(&one)
	if pgErr := wantSQLState(t, "guarded read with both standbys busy", err, "53300"); pgErr != nil {
		t.Logf("the client sees:\nERROR: %s\nDETAIL: %s\nHINT: %s", pgErr.Message, pgErr.Detail, pgErr.Hint)
		if !strings.HasPrefix(pgErr.Message, "pgowl: DATABASE_BUSY: ") || !strings.Contains(pgErr.Hint, "transient") {
			t.Errorf("refusal %q hint %q", pgErr.Message, pgErr.Hint)
		}
		for _, want := range []string{"guard=reports", pg3.Name + ": standby up", "lock_waiting=3", "at busy.max_active 3", "max_connections="} {
			if !strings.Contains(pgErr.Detail, want) {
				t.Errorf("DETAIL does not contain %q:\n%s", want, pgErr.Detail)
			}
		}
	}
	reports.routes(t)
	for i := 0; i < 3; i++ {
		if err := shop.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Errorf("business read with both standbys busy: %v", err)
		}
		if r := shop.oneRoute(t, "business read"); r.Raw != nil && strings.Contains(r.Raw.Detail, "guard=") {
			t.Errorf("business read NOTICE names a guard: %q", r.Raw.Detail)
		}
	}

	// The load goes: the guard's reads run again.
	waiters.release()
	holder.release()
	sleepers.release()
	o.waitSnapshot(t, 30*time.Second, "both standbys below the limit", func(s *route.Snapshot) bool {
		return findNode(s, pg2.Name).Load.Active < limit && findNode(s, pg3.Name).Load.Active < limit
	})
	if err := reports.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("guarded read after the load went: %v", err)
	}
}

// TestGuardLoadConcurrencyLimit: busy.max_in_flight bounds the guard's own
// statements running on a node through this pgowl: a second guarded
// statement goes to the other standby, a third gets DATABASE_BUSY, business
// traffic runs.
func TestGuardLoadConcurrencyLimit(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Guards = []config.Guard{{Name: "reports", Match: config.GuardMatch{ApplicationNames: []string{"report*"}},
			Busy: config.GuardBusy{MaxInFlight: 1}}}
	})
	shop := o.connect(t, withParams(map[string]string{"application_name": "shop"}))
	ctx := timeoutCtx(t, time.Minute)
	var wg sync.WaitGroup
	defer wg.Wait()
	ran := make(chan string, 2)
	for i := 0; i < 2; i++ {
		conn := o.connect(t, withParams(map[string]string{"application_name": fmt.Sprintf("report-%d", i)}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := conn.Exec(ctx, "SELECT pg_sleep(4)"); err != nil {
				ran <- "error: " + err.Error()
				return
			}
			rs := conn.routes(t)
			if len(rs) != 1 {
				ran <- fmt.Sprintf("%d NOTICEs", len(rs))
				return
			}
			ran <- rs[0].Node
		}()
		// Wait until the statement counts in flight before the next one is routed.
		deadline := time.Now().Add(10 * time.Second)
		for {
			inFlight := 0
			for _, row := range foShowNodes(t, ctx, shop) {
				if row["guards_in_flight"] == "reports=1" {
					inFlight++
				}
			}
			if inFlight == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("SHOW pgowl.nodes never showed %d nodes with reports=1 in flight", i+1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	third := o.connect(t, withParams(map[string]string{"application_name": "report-3"}))
	_, err := third.Exec(ctx, "SELECT 1")
	if pgErr := wantSQLState(t, "third guarded statement", err, "53300"); pgErr != nil &&
		!strings.Contains(pgErr.Detail, "guard_in_flight=1 at busy.max_in_flight 1") {
		t.Errorf("DETAIL:\n%s", pgErr.Detail)
	}
	if _, err := shop.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("business read: %v", err)
	}
	wg.Wait()
	a, b := <-ran, <-ran
	if a == b || !strings.HasPrefix(a, "pg") || !strings.HasPrefix(b, "pg") || a == c.Nodes[0].Name || b == c.Nodes[0].Name {
		t.Errorf("the two guarded statements ran on %q and %q, want the two standbys", a, b)
	}
}

// atoiOr is strconv.Atoi with a value for what is not a number.
func atoiOr(s string, otherwise int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return otherwise
}

// TestGuardLoadRefusesWriteOnBusyPrimary: a guard with guard_writes keeps
// its class's writes off a primary at its busy limit: the guarded write gets
// DATABASE_BUSY at once (it does not wait for routing.primary_wait), with
// the primary's load in the DETAIL and the transient HINT, and does not run,
// while a business write that runs at that very moment completes. A guarded
// read still runs on a standby, and once the load goes the guarded write runs.
func TestGuardLoadRefusesWriteOnBusyPrimary(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "guard_busy_writes", "CREATE TABLE guard_busy_writes (id int PRIMARY KEY, who text)")
	const limit = 3
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Guards = []config.Guard{{Name: "etl", Match: config.GuardMatch{ApplicationNames: []string{"etl-*"}},
			GuardWrites: true, Busy: config.GuardBusy{MaxActive: limit}}}
	})
	etl := o.connect(t, withParams(map[string]string{"application_name": "etl-nightly"}))
	shop := o.connect(t, withParams(map[string]string{"application_name": "shop"}))
	ctx := timeoutCtx(t, 2*time.Minute)
	pg1 := c.Nodes[0]

	if _, err := etl.Exec(ctx, "INSERT INTO guard_busy_writes VALUES (1, 'etl')"); err != nil {
		t.Fatalf("guarded write before the load: %v", err)
	}
	if r := etl.oneRoute(t, "guarded write before the load"); r.Raw != nil && (r.Node != pg1.Name || !strings.Contains(r.Raw.Detail, " guard=etl")) {
		t.Errorf("guarded write before the load: NOTICE %v %q, want %s and guard=etl", r, r.Raw.Detail, pg1.Name)
	}

	sleepers := holdLoad(t, pg1, "", limit, "SELECT pg_sleep(120)")
	waitLoad(t, o, pg1.Name, limit, 0)

	// A business write that runs while the guarded one is refused.
	businessDone := make(chan error, 1)
	go func() {
		_, err := shop.Exec(ctx, "INSERT INTO guard_busy_writes SELECT 2, 'shop' FROM pg_sleep(3) /* business_write */")
		businessDone <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for sleepersOn(t, o, "business_write")[pg1.Name] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the business write never ran on %s", pg1.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	_, err := etl.Exec(ctx, "INSERT INTO guard_busy_writes VALUES (3, 'etl')")
	took := time.Since(start)
	if pgErr := wantSQLState(t, "guarded write with the primary busy", err, "53300"); pgErr != nil {
		t.Logf("the client sees after %s:\nERROR: %s\nDETAIL: %s\nHINT: %s", took.Round(time.Millisecond), pgErr.Message, pgErr.Detail, pgErr.Hint)
		wantMessage := "pgowl: DATABASE_BUSY: " + pg1.Name + ", which would run this statement, is at guard etl's busy limits"
		if pgErr.Message != wantMessage || !strings.Contains(pgErr.Hint, "transient") {
			t.Errorf("refusal %q hint %q, want %q and a transient hint", pgErr.Message, pgErr.Hint, wantMessage)
		}
		for _, want := range []string{"guard=etl\n", pg1.Name + ": primary up", "max_connections=", "at busy.max_active 3"} {
			if !strings.Contains(pgErr.Detail, want) {
				t.Errorf("DETAIL does not contain %q:\n%s", want, pgErr.Detail)
			}
		}
		if active := regexp.MustCompile(pg1.Name + `: primary up[^\n]* active=([0-9]+) `).FindStringSubmatch(pgErr.Detail); active == nil || atoiOr(active[1], 0) < limit {
			t.Errorf("DETAIL does not give %s's active sessions (at least %d):\n%s", pg1.Name, limit, pgErr.Detail)
		}
	}
	if took >= o.cfg.Routing.PrimaryWait {
		t.Errorf("the guarded write was refused after %s: it waited routing.primary_wait (%s) as for a missing primary", took, o.cfg.Routing.PrimaryWait)
	}
	select {
	case err := <-businessDone:
		t.Errorf("the business write ended (%v) before the guarded write was refused: they did not overlap", err)
	default:
	}
	if err := <-businessDone; err != nil {
		t.Errorf("business write while the guarded write was refused: %v", err)
	}
	if r := shop.oneRoute(t, "business write"); r.Raw != nil && (r.Node != pg1.Name || strings.Contains(r.Raw.Detail, "guard=")) {
		t.Errorf("business write: NOTICE %v %q, want %s and no guard", r, r.Raw.Detail, pg1.Name)
	}

	// The first write of a transaction is refused the same way, and the
	// transaction fails as it would on a node.
	if _, err := etl.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	_, err = etl.Exec(ctx, "INSERT INTO guard_busy_writes VALUES (4, 'etl')")
	wantSQLState(t, "guarded write opening a transaction", err, "53300")
	_, err = etl.Exec(ctx, "SELECT 1")
	wantSQLState(t, "the next statement of that transaction", err, "25P02")
	if _, err := etl.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	etl.routes(t)

	// The guard's reads go to the standbys, which are not busy (once they
	// have the session's write: read your writes would send the read to
	// the primary).
	catchUp(t, c)
	var n int64
	if err := etl.QueryRow(ctx, "SELECT count(*) FROM pg_class").Scan(&n); err != nil {
		t.Errorf("guarded read with only the primary busy: %v", err)
	} else if r := etl.oneRoute(t, "guarded read"); r.Raw != nil && r.Role != "standby" {
		t.Errorf("guarded read with only the primary busy ran on %v, want a standby", r)
	}

	var got string
	if err := pg1.QueryRow(ctx, "SELECT string_agg(id || '=' || who, ' ' ORDER BY id) FROM guard_busy_writes").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "1=etl 2=shop" {
		t.Errorf("guard_busy_writes holds %q, want \"1=etl 2=shop\": a refused write ran, or the business write did not", got)
	}

	// The load goes: the guarded write runs.
	sleepers.release()
	o.waitSnapshot(t, 30*time.Second, pg1.Name+" below the limit", func(s *route.Snapshot) bool {
		return findNode(s, pg1.Name).Load.Active < limit
	})
	if _, err := etl.Exec(ctx, "INSERT INTO guard_busy_writes VALUES (5, 'etl')"); err != nil {
		t.Errorf("guarded write after the load went: %v", err)
	}
}

// maxPercentSessions bounds the sleeping sessions TestGuardLoadActivePercent
// opens on one node.
const maxPercentSessions = 12

// TestGuardLoadActivePercent: busy.max_active_percent is a share of each
// node's max_connections, read by the monitor. The test reads the standbys'
// max_connections, picks the smallest percent that needs at least three
// active sessions, and raises the load one session at a time: one session
// under that number on both standbys, guarded reads run; at it on one, they
// move to the other; at it on both, DATABASE_BUSY names the percent limit,
// while business reads run; when the load goes, guarded reads run again.
func TestGuardLoadActivePercent(t *testing.T) {
	c := sharedClusterFor(t)
	pg2, pg3 := c.Nodes[1], c.Nodes[2]
	ctx := timeoutCtx(t, 2*time.Minute)
	maxConns := 0
	for _, n := range []*cluster.Node{pg2, pg3} {
		var v int
		if err := n.QueryRow(ctx, "SELECT current_setting('max_connections')::int").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if maxConns != 0 && v != maxConns {
			t.Fatalf("the standbys' max_connections differ (%d, %d); the test needs one value", maxConns, v)
		}
		maxConns = v
	}
	if maxConns <= 0 {
		t.Fatalf("max_connections=%d", maxConns)
	}
	// The limit trips at ceil(percent * max_connections / 100) active sessions.
	percent, need := 0, 0
	for percent = 1; percent <= 100; percent++ {
		if need = (percent*maxConns + 99) / 100; need >= 3 {
			break
		}
	}
	if need > maxPercentSessions {
		t.Fatalf("max_connections=%d: 1%% of it is %d active sessions, more than the %d this test opens per node; "+
			"the harness's clusters set max_connections=200", maxConns, need, maxPercentSessions)
	}
	t.Logf("max_connections=%d: busy.max_active_percent %d%% trips at %d active sessions", maxConns, percent, need)

	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Guards = []config.Guard{{Name: "reports", Match: config.GuardMatch{ApplicationNames: []string{"report*"}},
			Busy: config.GuardBusy{MaxActivePercent: percent}}}
	})
	o.waitSnapshot(t, 30*time.Second, "the standbys' max_connections", func(s *route.Snapshot) bool {
		return findNode(s, pg2.Name).Load.MaxConnections == maxConns && findNode(s, pg3.Name).Load.MaxConnections == maxConns
	})
	reports := o.connect(t, withParams(map[string]string{"application_name": "report-weekly"}))
	shop := o.connect(t, withParams(map[string]string{"application_name": "shop"}))
	guardedReads := func(what string, want func(node string) bool) {
		t.Helper()
		for i := 0; i < 4; i++ {
			var one int
			if err := reports.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				t.Fatalf("%s: guarded read: %v", what, err)
			}
			if r := reports.oneRoute(t, what); r.Raw != nil && !want(r.Node) {
				t.Errorf("%s: guarded read ran on %v", what, r)
			}
		}
	}

	// One under the limit on both standbys: not busy.
	var holders []*loadHolders
	defer func() {
		for _, h := range holders {
			h.release()
		}
	}()
	holders = append(holders, holdLoad(t, pg2, "", need-1, "SELECT pg_sleep(120)"), holdLoad(t, pg3, "", need-1, "SELECT pg_sleep(120)"))
	waitLoad(t, o, pg2.Name, need-1, 0)
	waitLoad(t, o, pg3.Name, need-1, 0)
	guardedReads(fmt.Sprintf("%d active on both standbys", need-1), func(node string) bool { return node == pg2.Name || node == pg3.Name })

	// At the limit on pg2: the reads go to pg3.
	holders = append(holders, holdLoad(t, pg2, "", 1, "SELECT pg_sleep(120)"))
	waitLoad(t, o, pg2.Name, need, 0)
	guardedReads(fmt.Sprintf("%d active on %s", need, pg2.Name), func(node string) bool { return node == pg3.Name })

	// At the limit on both: DATABASE_BUSY, and business reads run.
	holders = append(holders, holdLoad(t, pg3, "", 1, "SELECT pg_sleep(120)"))
	waitLoad(t, o, pg3.Name, need, 0)
	var one int
	err := reports.QueryRow(ctx, "SELECT 1").Scan(&one)
	if pgErr := wantSQLState(t, "guarded read with both standbys at the percent limit", err, "53300"); pgErr != nil {
		t.Logf("the client sees:\nERROR: %s\nDETAIL: %s\nHINT: %s", pgErr.Message, pgErr.Detail, pgErr.Hint)
		at := fmt.Sprintf("max_connections=%d guard_in_flight=0 at busy.max_active_percent %d%% of max_connections", maxConns, percent)
		for _, node := range []string{pg2.Name, pg3.Name} {
			line := regexp.MustCompile(`(?m)^` + node + `: standby up .*$`).FindString(pgErr.Detail)
			if !strings.HasSuffix(line, at) {
				t.Errorf("DETAIL line of %s %q does not end with %q", node, line, at)
			}
		}
		if !strings.Contains(pgErr.Hint, "transient") {
			t.Errorf("hint %q", pgErr.Hint)
		}
	}
	reports.routes(t)
	if err := shop.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("business read with both standbys at the percent limit: %v", err)
	}
	shop.routes(t)

	// The load goes: the limit clears.
	for _, h := range holders {
		h.release()
	}
	o.waitSnapshot(t, 30*time.Second, "both standbys below the limit", func(s *route.Snapshot) bool {
		return findNode(s, pg2.Name).Load.Active < need && findNode(s, pg3.Name).Load.Active < need
	})
	guardedReads("after the load went", func(node string) bool { return node == pg2.Name || node == pg3.Name })
}

// TestGuardLoadReadYourWritesFallbackRefusesOnABusyPrimary checks that a
// guarded read that must see the session's write, when no standby has
// replayed it, is not sent to a primary at its guard's busy limits by the
// read-your-writes fallback: it gets DATABASE_BUSY, like every guarded read
// with no node it may use. (route.Plan's last busy check once covered
// standbys only, and such a read ran on the busy primary.) The test pauses
// replay on both standbys so that the fallback is certain.
func TestGuardLoadReadYourWritesFallbackRefusesOnABusyPrimary(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "guard_ryw", "CREATE TABLE guard_ryw (id int)")
	const limit = 3
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Routing.ReadYourWrites = config.ReadYourWritesSession
		cfg.Routing.ReadYourWritesWait = 200 * time.Millisecond
		cfg.Routing.ReadYourWritesFallback = config.WhenNoStandbyPrimary
		cfg.Guards = []config.Guard{{Name: "reports", Match: config.GuardMatch{ApplicationNames: []string{"report*"}},
			Busy: config.GuardBusy{MaxActive: limit}}} // reads only: the session's write is business
	})
	reports := o.connect(t, withParams(map[string]string{"application_name": "report-weekly"}))
	ctx := timeoutCtx(t, time.Minute)
	pg1 := c.Nodes[0]
	holdLoad(t, pg1, "", limit, "SELECT pg_sleep(120)")
	waitLoad(t, o, pg1.Name, limit, 0)
	for _, sb := range c.Nodes[1:] {
		if err := sb.PauseReplay(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := sb.ResumeReplay(ctx); err != nil {
				t.Errorf("resume replay on %s: %v", sb.Name, err)
			}
		})
	}
	if _, err := reports.Exec(ctx, "INSERT INTO guard_ryw VALUES (1)"); err != nil {
		t.Fatalf("the session's write (not guarded): %v", err)
	}
	reports.routes(t)
	var n int64
	err := reports.QueryRow(ctx, "SELECT count(*) FROM guard_ryw").Scan(&n)
	pgErr, ok := asPgError(err)
	if !ok || pgErr.Code != "53300" {
		t.Fatalf("guarded read after the write, with replay paused and %s at guard reports's busy.max_active %d: got %v (%d rows) and routes %v, want DATABASE_BUSY (53300)",
			pg1.Name, limit, err, n, reports.routes(t))
	}
	if !strings.Contains(pgErr.Message, pg1.Name+", which would run this statement, is at guard reports's busy limits") ||
		!strings.Contains(pgErr.Detail, pg1.Name) || !strings.Contains(pgErr.Hint, "transient") {
		t.Fatalf("DATABASE_BUSY does not name the busy primary:\n%s\n%s\n%s", pgErr.Message, pgErr.Detail, pgErr.Hint)
	}
	t.Logf("a guarded read that only the busy primary could serve: %s\n%s", pgErr.Message, pgErr.Detail)
}
