package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// TestReloadWarmsAddedNodesAndForgetsRemovedOnes, with pool.min_idle: 2. A reload that adds pg3
// has pgowl open pg3's idle connections for the logins that used the other nodes, before any
// statement goes there (it used to wait for a session's first statement on pg3, whose dial it
// then waited for). A reload that removes pg2 closes pg2's connections, and the pool dials it no
// more (it used to go on keeping min_idle connections open to a node no longer configured).
func TestReloadWarmsAddedNodesAndForgetsRemovedOnes(t *testing.T) {
	c := sharedClusterFor(t)
	pg1, pg2, pg3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	const app, minIdle = "pgowl-reload-warm", 2
	o := startOwlNoWait(t, c, func(cfg *config.Config) {
		cfg.Pool.MinIdle = minIdle
		cfg.Nodes = slices.DeleteFunc(cfg.Nodes, func(n config.Node) bool { return n.Name == pg3.Name })
	})
	o.waitRoles(t, map[string]route.Role{pg1.Name: route.RolePrimary, pg2.Name: route.RoleStandby})
	ctx := timeoutCtx(t, time.Minute)
	backends := func(n *cluster.Node) int {
		var count int
		if err := n.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&count); err != nil {
			t.Fatal(err)
		}
		return count
	}
	waitBackends := func(n *cluster.Node, what string, ok func(int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(backends(n)) {
			if time.Now().After(deadline) {
				t.Fatalf("after 10s %s has %d backends of %s; want %s", n.Name, backends(n), app, what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	client := o.connect(t, withParams(map[string]string{"application_name": app}))
	// A read on pg2 and a write on pg1: the login is remembered on both.
	for _, sql := range []string{"SELECT 1", "SELECT pg_catalog.txid_current()"} {
		if _, err := client.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	waitBackends(pg2, "pool.min_idle", func(n int) bool { return n >= minIdle })
	if got := backends(pg3); got != 0 {
		t.Fatalf("%s, not configured, has %d backends of %s", pg3.Name, got, app)
	}

	withPg3 := o.cfg
	withPg3.Nodes = append(slices.Clone(o.cfg.Nodes), config.Node{Name: pg3.Name, Host: pg3.Host, Port: pg3.Port})
	if err := o.inst.Apply(withPg3); err != nil {
		t.Fatalf("reload adding %s: %v", pg3.Name, err)
	}
	// No statement is sent: the connections are the pool's own.
	waitBackends(pg3, "pool.min_idle, opened before any statement went there", func(n int) bool { return n >= minIdle })

	withoutPg2 := withPg3
	withoutPg2.Nodes = slices.DeleteFunc(slices.Clone(withPg3.Nodes), func(n config.Node) bool { return n.Name == pg2.Name })
	if err := o.inst.Apply(withoutPg2); err != nil {
		t.Fatalf("reload removing %s: %v", pg2.Name, err)
	}
	waitBackends(pg2, "none once it is removed", func(n int) bool { return n == 0 })
	// Several maintenance rounds (twice a second) later, none was opened again.
	time.Sleep(2 * time.Second)
	if got := backends(pg2); got != 0 {
		t.Fatalf("%s, removed by the reload, has %d backends of %s again: the pool still dials it", pg2.Name, got, app)
	}
	if got := backends(pg3); got < minIdle {
		t.Errorf("%s has %d backends of %s after the second reload, want pool.min_idle = %d", pg3.Name, got, app, minIdle)
	}
}
