package pool

import (
	"context"
	"testing"
	"time"
)

// TestAcquireNowNeverWaits: AcquireNow dials under the cap, hands out an idle connection, and
// returns nothing at once when the node is at its cap, where Acquire would wait.
func TestAcquireNowNeverWaits(t *testing.T) {
	target, login := startNode(t)
	p := New(Options{MaxPerNode: 1, AcquireTimeout: 10 * time.Second})
	defer p.Close()
	ctx := context.Background()
	dialled, err := p.AcquireNow(ctx, target, login)
	if err != nil || dialled == nil {
		t.Fatalf("under the cap: %v, %v; want a new connection", dialled, err)
	}
	began := time.Now()
	if c, err := p.AcquireNow(ctx, target, login); c != nil || err != nil {
		t.Fatalf("at the cap: %v, %v; want nothing", c, err)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Errorf("at the cap AcquireNow took %v", waited)
	}
	p.Release(dialled, true)
	idle, err := p.AcquireNow(ctx, target, login)
	if err != nil || idle != dialled {
		t.Fatalf("with one idle: %v, %v; want the idle connection", idle, err)
	}
	p.Release(idle, true)
}
