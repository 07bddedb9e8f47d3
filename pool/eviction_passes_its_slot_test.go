package pool

import (
	"context"
	"testing"
	"time"
)

// TestEvictionPassesItsSlotWithoutCountingANewOne: at the cap, an Acquire (or AcquireNow) of
// another login closes an idle connection and dials in its slot; the node's count of open
// connections stays at the cap. It used to count the dial as one more slot, so that each
// eviction left a slot counted for a connection that no longer existed, until the node served
// nothing.
func TestEvictionPassesItsSlotWithoutCountingANewOne(t *testing.T) {
	target, first := startNode(t)
	other := first
	other.Database = "template1"
	p := New(Options{MaxPerNode: 2, AcquireTimeout: 2 * time.Second})
	defer p.Close()
	ctx := context.Background()
	cycle := func(login Login, acquire func(context.Context, Target, Login) (*Conn, error)) {
		t.Helper()
		var held []*Conn
		for range 2 {
			c, err := acquire(ctx, target, login)
			if err != nil || c == nil {
				t.Fatalf("acquire as %s: %v, %v", login.Database, c, err)
			}
			held = append(held, c)
		}
		for _, c := range held {
			p.Release(c, true)
		}
		if open := p.openOn(target.Node); open != 2 {
			t.Fatalf("after two acquires as %s, %d connections are counted open; want 2", login.Database, open)
		}
	}
	cycle(first, p.Acquire)
	cycle(other, p.Acquire)    // evicts both of first's
	cycle(first, p.AcquireNow) // evicts both of other's
	cycle(other, p.Acquire)
}

// openOn is how many connections are counted open to node.
func (p *Pool) openOn(node string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node(node).open
}
