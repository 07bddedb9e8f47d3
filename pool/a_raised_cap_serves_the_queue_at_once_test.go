package pool

import (
	"context"
	"testing"
	"time"
)

// TestARaisedCapServesTheQueueAtOnce: raising pool.max_per_node by a reload (SetMaxPerNode) while
// Acquires wait at the old cap gives them the new slots at once; they dial and are served while
// the connections that filled the old cap are still in use. Before, the new cap served only
// Acquires that came after, and the queue waited for releases, one waiter per release.
func TestARaisedCapServesTheQueueAtOnce(t *testing.T) {
	target, login := startNode(t)
	p := New(Options{MaxPerNode: 1, AcquireTimeout: 20 * time.Second})
	defer p.Close()
	ctx := context.Background()
	held, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(held, true)
	type result struct {
		conn *Conn
		err  error
	}
	served := make(chan result, 2)
	for range 2 {
		go func() {
			c, err := p.Acquire(ctx, target, login)
			served <- result{c, err}
		}()
	}
	waitFor(t, 5*time.Second, "two Acquires queued at the cap", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.node(target.Node).waiters) == 2
	})
	raised := time.Now()
	p.SetMaxPerNode(3)
	for i := range 2 {
		select {
		case r := <-served:
			if r.err != nil {
				t.Fatalf("queued Acquire %d after the cap was raised: %v", i+1, r.err)
			}
			t.Logf("queued Acquire %d served %s after the cap was raised", i+1, time.Since(raised).Round(time.Millisecond))
			defer p.Release(r.conn, true)
		case <-time.After(10 * time.Second):
			t.Fatalf("a queued Acquire still waits 10s after the cap was raised from 1 to 3, with one connection in use")
		}
	}
	if open, _ := p.Stats(target.Node); open != 3 {
		t.Errorf("%d connections open, want 3 (the new cap)", open)
	}
}
