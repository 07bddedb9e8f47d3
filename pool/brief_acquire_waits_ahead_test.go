package pool

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestBriefAcquireWaitsAheadOfOtherAcquires: at the cap, a connection released goes to the
// AcquireBriefly waiting, though an Acquire has waited longer; brief waiters are served among
// themselves in arrival order, and the Acquire gets the connection after them.
func TestBriefAcquireWaitsAheadOfOtherAcquires(t *testing.T) {
	target, login := startNode(t)
	p := New(Options{MaxPerNode: 1, AcquireTimeout: 10 * time.Second})
	defer p.Close()
	ctx := context.Background()
	held, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan string, 3)
	queue := func(name string, acquire func(context.Context, Target, Login) (*Conn, error)) {
		waiting := p.waitingOn(target.Node)
		go func() {
			c, err := acquire(ctx, target, login)
			if err != nil {
				t.Error(name, err)
				served <- name
				return
			}
			served <- name
			p.Release(c, true)
		}()
		for deadline := time.Now().Add(5 * time.Second); p.waitingOn(target.Node) == waiting; {
			if time.Now().After(deadline) {
				t.Fatalf("%s never waited", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	queue("transaction", p.Acquire)
	queue("first prepare", p.AcquireBriefly)
	queue("second prepare", p.AcquireBriefly)
	p.Release(held, true)
	var order []string
	for range 3 {
		select {
		case name := <-served:
			order = append(order, name)
		case <-time.After(10 * time.Second):
			t.Fatalf("served only %v", order)
		}
	}
	if want := []string{"first prepare", "second prepare", "transaction"}; !slices.Equal(order, want) {
		t.Errorf("served %v, want %v", order, want)
	}
}

// waitingOn is how many Acquires wait for node.
func (p *Pool) waitingOn(node string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.node(node).waiters)
}
