package pool

import (
	"context"
	"fmt"
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
	useOnce(t, p, kept, login, 2)

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

// TestNodeMovedByReloadIsDialledOnlyAtItsNewAddress: MoveNode closes the idle connections to the
// old address and has the node's logins dialled at the new one at once; an Acquire that began
// before a node was forgotten does not bring its login back when it returns.
func TestNodeMovedByReloadIsDialledOnlyAtItsNewAddress(t *testing.T) {
	_, old, login := startPostgres(t)
	p := New(Options{MaxPerNode: 5, MinIdle: 2})
	defer p.Close()
	useOnce(t, p, old, login, 2)

	moved := Target{Node: old.Node, Host: "localhost", Port: old.Port} // the same server, another address
	p.MoveNode(moved, []string{old.Node})
	waitFor(t, 5*time.Second, "2 idle connections, all at the new address", func() bool {
		addrs := idleAddrs(p, moved.Node)
		if len(addrs) != 2 {
			return false
		}
		for _, addr := range addrs {
			if addr != moved.Addr() {
				return false
			}
		}
		return true
	})
	if got := openCount(p, moved.Node); got != 2 {
		t.Fatalf("open = %d after the move, want the 2 new idle connections", got)
	}

	// An Acquire that got its connection before ForgetNode returns after it.
	p.mu.Lock()
	before := p.node(moved.Node).gen
	p.mu.Unlock()
	p.ForgetNode(moved.Node)
	p.remember(moved, login.Keyed(), login.key(), before)
	p.mu.Lock()
	logins := len(p.node(moved.Node).logins)
	p.mu.Unlock()
	if logins != 0 {
		t.Fatalf("%d logins remembered on the forgotten node after an Acquire begun before ForgetNode returned, want 0", logins)
	}
}

// idleAddrs returns the addresses of node's idle connections.
func idleAddrs(p *Pool, node string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var addrs []string
	for _, list := range p.node(node).idle {
		for _, c := range list {
			addrs = append(addrs, c.Addr)
		}
	}
	return addrs
}

// useOnce has login acquire and release a connection to t, and waits for the pool to hold minIdle
// idle connections of it there.
func useOnce(t *testing.T, p *Pool, target Target, login Login, minIdle int) {
	t.Helper()
	held, err := p.Acquire(context.Background(), target, login)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(held, true)
	waitFor(t, 5*time.Second, fmt.Sprintf("%d idle connections on %s after one use", minIdle, target.Addr()), func() bool {
		_, idle := p.Stats(target.Node)
		return idle == minIdle
	})
}
