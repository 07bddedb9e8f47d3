package integration

import (
	"context"
	"fmt"
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
