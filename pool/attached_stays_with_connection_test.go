package pool

import (
	"context"
	"testing"
	"time"
)

// TestAttachedStaysWithTheConnection: what the pool's user attached to a
// connection is there again when the connection comes back from the pool,
// and a health check, which sends a simple Query, counts in QueriesSent. A
// connection released as not reusable is closed, and the next one is new,
// with nothing attached.
func TestAttachedStaysWithTheConnection(t *testing.T) {
	target, login := startNode(t)
	p := New(Options{MaxPerNode: 1, AcquireTimeout: 5 * time.Second, HealthCheckAfter: time.Millisecond})
	defer p.Close()
	ctx := context.Background()

	c, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	if c.Attached != nil {
		t.Fatalf("a new connection comes with %v attached", c.Attached)
	}
	record := &struct{ prepared []string }{prepared: []string{"s1"}}
	c.Attached = record
	queries := c.QueriesSent()
	p.Release(c, true)

	time.Sleep(20 * time.Millisecond) // past HealthCheckAfter: the next Acquire checks it
	again, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	if again != c {
		t.Fatal("the pool of one connection gave another connection")
	}
	if again.Attached != record {
		t.Fatalf("the connection came back from the pool with %v attached, want what its user left", again.Attached)
	}
	if again.QueriesSent() != queries+1 {
		t.Fatalf("QueriesSent went from %d to %d across a health check, want one more", queries, again.QueriesSent())
	}
	p.Release(again, false)

	fresh, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(fresh, true)
	if fresh == c || fresh.Attached != nil {
		t.Fatalf("after the connection was closed the pool gave %p with %v attached, want a new connection with nothing", fresh, fresh.Attached)
	}
}
