package pool

import (
	"context"
	"testing"
	"time"
)

// TestRetiredConnectionsAreNotHandedOutAgain: after RetireDatabase, an idle connection of that
// database is closed at once and one in use is closed when released; the next acquire dials a
// new backend, which logs in with the defaults of that moment. Another database's connections
// stay pooled.
func TestRetiredConnectionsAreNotHandedOutAgain(t *testing.T) {
	target, login := startNode(t)
	other := login
	other.Database = "template1"
	p := New(Options{MaxPerNode: 4, AcquireTimeout: 5 * time.Second})
	defer p.Close()
	ctx := context.Background()
	idle := acquireOrFail(t, p, target, login)
	busy := acquireOrFail(t, p, target, login)
	elsewhere := acquireOrFail(t, p, target, other)
	idlePID, busyPID, elsewherePID := idle.PID, busy.PID, elsewhere.PID
	p.Release(idle, true)
	p.Release(elsewhere, true)
	p.RetireDatabase(login.Database)
	if inUse, idleCount := p.Stats(target.Node); inUse != 1 || idleCount != 1 {
		t.Errorf("after the retire: %d in use, %d idle; want the busy one in use and the other database's idle", inUse, idleCount)
	}
	p.Release(busy, true)
	if inUse, idleCount := p.Stats(target.Node); inUse != 0 || idleCount != 1 {
		t.Errorf("after the retired busy one came back: %d in use, %d idle; want it closed", inUse, idleCount)
	}
	again := acquireOrFail(t, p, target, login)
	if again.PID == idlePID || again.PID == busyPID {
		t.Errorf("acquired backend %d after the retire: one made before it (%d, %d)", again.PID, idlePID, busyPID)
	}
	p.Release(again, true)
	if c, err := p.Acquire(ctx, target, other); err != nil {
		t.Error(err)
	} else if c.PID != elsewherePID {
		t.Errorf("the other database's connection: pid %d; want the pooled %d", c.PID, elsewherePID)
	}
	// A connection made after the retire is pooled as usual.
	if c, err := p.Acquire(ctx, target, login); err != nil {
		t.Error(err)
	} else if c.PID != again.PID {
		t.Errorf("a connection made after the retire was not pooled: pid %d, want %d", c.PID, again.PID)
	}
}

// TestRetiringOneNodeLeavesTheOthersPooled: RetireDatabaseOn ends the connections of one node
// whose dial began no later than its bound, as RetireDatabase does on every node: the idle one
// closes at once, the one in use when released. A connection of another node (the same server
// under a second name, as a standby would be), in use during the retire, and one dialled after
// the bound, stay pooled.
func TestRetiringOneNodeLeavesTheOthersPooled(t *testing.T) {
	target, login := startNode(t)
	other := target
	other.Node = target.Node + "-b"
	p := New(Options{MaxPerNode: 4, AcquireTimeout: 5 * time.Second})
	defer p.Close()
	ctx := context.Background()
	idle := acquireOrFail(t, p, target, login)
	busy := acquireOrFail(t, p, target, login)
	elsewhere := acquireOrFail(t, p, other, login)
	elsewherePID := elsewhere.PID
	bound := time.Now()
	time.Sleep(time.Millisecond)
	later := acquireOrFail(t, p, target, login) // dialled after the bound
	p.Release(idle, true)
	p.RetireDatabaseOn(target.Node, login.Database, bound)
	p.Release(elsewhere, true) // in use during the retire: pooled when it comes back
	if inUse, idleCount := p.Stats(target.Node); inUse != 2 || idleCount != 0 {
		t.Errorf("after the retire: %d in use, %d idle on %s; want the two in use, the idle one closed", inUse, idleCount, target.Node)
	}
	p.Release(busy, true)
	p.Release(later, true)
	if inUse, idleCount := p.Stats(target.Node); inUse != 0 || idleCount != 1 {
		t.Errorf("after both came back: %d in use, %d idle; want the one dialled after the bound pooled", inUse, idleCount)
	}
	if c, err := p.Acquire(ctx, target, login); err != nil {
		t.Error(err)
	} else if c.PID != later.PID {
		t.Errorf("on %s: pid %d; want the pooled %d", target.Node, c.PID, later.PID)
	}
	if c, err := p.Acquire(ctx, other, login); err != nil {
		t.Error(err)
	} else if c.PID != elsewherePID {
		t.Errorf("on %s: pid %d; want the pooled %d", other.Node, c.PID, elsewherePID)
	}
}

// acquireOrFail acquires a connection of login on target from p, failing t when it cannot.
func acquireOrFail(t *testing.T, p *Pool, target Target, login Login) *Conn {
	t.Helper()
	c, err := p.Acquire(context.Background(), target, login)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
