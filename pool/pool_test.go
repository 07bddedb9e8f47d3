package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

func startNode(t *testing.T) (Target, Login) {
	t.Helper()
	_, target, login := startPostgres(t)
	return target, login
}

// startPostgres starts a one-node cluster with user app and returns the node,
// for superuser queries, with the pool's target and login for it.
func startPostgres(t *testing.T) (*cluster.Node, Target, Login) {
	t.Helper()
	c := cluster.StartForTest(t, cluster.Options{Users: []cluster.User{{Name: "app", Password: "secret"}}})
	n := c.Nodes[0]
	return n, Target{Node: n.Name, Host: n.Host, Port: n.Port}, Login{User: "app", Password: "secret", Database: "postgres"}
}

// TestAcquireWaitsInOrderWithinTheCap has more clients than the cap take and
// return connections; every one gets served, and the cap is never exceeded.
func TestAcquireWaitsInOrderWithinTheCap(t *testing.T) {
	target, login := startNode(t)
	p := New(Options{MaxPerNode: 2, AcquireTimeout: 5 * time.Second})
	defer p.Close()
	var (
		wg      sync.WaitGroup
		maxOpen atomic.Int64
		served  atomic.Int64
	)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				c, err := p.Acquire(context.Background(), target, login)
				if err != nil {
					t.Error(err)
					return
				}
				inUse, idle := p.Stats(target.Node)
				if n := int64(inUse + idle); n > maxOpen.Load() {
					maxOpen.Store(n)
				}
				time.Sleep(5 * time.Millisecond)
				p.Release(c, true)
				served.Add(1)
			}
		}()
	}
	wg.Wait()
	if served.Load() != 40 {
		t.Fatalf("served %d acquires, want 40", served.Load())
	}
	if maxOpen.Load() > 2 {
		t.Fatalf("saw %d connections open to the node, cap is 2", maxOpen.Load())
	}
}

func TestAcquireTimesOutAsBusy(t *testing.T) {
	target, login := startNode(t)
	p := New(Options{MaxPerNode: 1, AcquireTimeout: 200 * time.Millisecond})
	defer p.Close()
	held, err := p.Acquire(context.Background(), target, login)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = p.Acquire(context.Background(), target, login)
	var busy *BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("want BusyError, got %v", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("waited %v for a 200ms acquire timeout", waited)
	}
	p.Release(held, true)
	c, err := p.Acquire(context.Background(), target, login)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if c != held {
		t.Fatal("the released idle connection was not reused")
	}
	p.Release(c, true)
}

func TestWrongPasswordIsTheNodesError(t *testing.T) {
	target, login := startNode(t)
	p := New(Options{})
	defer p.Close()
	login.Password = "wrong"
	_, err := p.Acquire(context.Background(), target, login)
	if pgErr := PgError(err); pgErr == nil || pgErr.Code != "28P01" {
		t.Fatalf("want the node's 28P01, got %v", err)
	}
	if inUse, idle := p.Stats(target.Node); inUse+idle != 0 {
		t.Fatalf("a failed dial left %d+%d connections counted", inUse, idle)
	}
}
