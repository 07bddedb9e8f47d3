package pool

import (
	"context"
	"testing"
	"time"
)

// TestNodeAddedByReloadIsWarmedWithOtherNodesLogins: a node given the logins of another
// (RememberLoginsOf, as a reload does for a node it adds) gets min_idle idle connections of
// them before anyone acquires there; a node forgotten (ForgetNode, for a node a reload removes)
// has its connections closed and gets no background dial again. Both names point at one server,
// told apart by the pool's counts of each node.
func TestNodeAddedByReloadIsWarmedWithOtherNodesLogins(t *testing.T) {
	node, kept, login := startPostgres(t)
	p := New(Options{MaxPerNode: 5, MinIdle: 2})
	defer p.Close()
	held, err := p.Acquire(context.Background(), kept, login)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(held, true)
	waitFor(t, 5*time.Second, "2 idle connections on the node used", func() bool {
		_, idle := p.Stats(kept.Node)
		return idle == 2
	})

	added := Target{Node: "added", Host: kept.Host, Port: kept.Port}
	p.RememberLoginsOf(added, []string{kept.Node, added.Node, "no-such-node"})
	waitFor(t, 5*time.Second, "2 idle connections on the added node, which nobody used", func() bool {
		inUse, idle := p.Stats(added.Node)
		return inUse == 0 && idle == 2
	})
	if got := appBackends(t, node); got != 4 {
		t.Fatalf("pg_stat_activity shows %d backends of app, want 4 (2 idle per node)", got)
	}
	c, err := p.AcquireIdle(context.Background(), added, login)
	if err != nil || c == nil {
		t.Fatalf("AcquireIdle on the added node: %v, %v; want one of its warm connections", c, err)
	}
	p.Release(c, true)

	p.ForgetNode(added.Node)
	waitFor(t, 5*time.Second, "no connection left on the forgotten node", func() bool { return openCount(p, added.Node) == 0 })
	dials := refillDials(p, added.Node)
	time.Sleep(3 * maintenanceInterval)
	if got := refillDials(p, added.Node); got != dials || openCount(p, added.Node) != 0 {
		t.Fatalf("after ForgetNode: %d background dials (was %d), %d connections open; want none", got, dials, openCount(p, added.Node))
	}
	if _, idle := p.Stats(kept.Node); idle != 2 {
		t.Fatalf("the kept node has %d idle connections, want its 2", idle)
	}
}

// refillDials returns the background dials started to node.
func refillDials(p *Pool, node string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node(node).refillDials
}
