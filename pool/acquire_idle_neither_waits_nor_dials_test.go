package pool

import (
	"context"
	"testing"
	"time"
)

// AcquireIdle hands out an idle connection of the login when one is free, and otherwise returns
// nil at once: it neither dials (an empty pool stays empty) nor waits (a full pool whose
// connections are all in use).
func TestAcquireIdleNeitherWaitsNorDials(t *testing.T) {
	target, login := startNode(t)
	p := New(Options{MaxPerNode: 1, AcquireTimeout: 5 * time.Second})
	defer p.Close()
	ctx := context.Background()
	if c, err := p.AcquireIdle(ctx, target, login); c != nil || err != nil {
		t.Fatalf("AcquireIdle on an empty pool = %v, %v; want nil, nil (no dial)", c, err)
	}
	if inUse, idle := p.Stats(target.Node); inUse+idle != 0 {
		t.Fatalf("AcquireIdle opened a connection: %d in use, %d idle", inUse, idle)
	}
	held, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if c, err := p.AcquireIdle(ctx, target, login); c != nil || err != nil {
		t.Fatalf("AcquireIdle with the only connection in use = %v, %v; want nil, nil", c, err)
	}
	if waited := time.Since(started); waited > time.Second {
		t.Fatalf("AcquireIdle waited %v for a busy pool", waited)
	}
	p.Release(held, true)
	c, err := p.AcquireIdle(ctx, target, login)
	if err != nil || c != held {
		t.Fatalf("AcquireIdle with an idle connection = %v, %v; want the idle one", c, err)
	}
	other := login
	other.User = "postgres"
	if c, err := p.AcquireIdle(ctx, target, other); c != nil || err != nil {
		t.Fatalf("AcquireIdle for another login = %v, %v; want nil, nil", c, err)
	}
	p.Release(c, true)
}
