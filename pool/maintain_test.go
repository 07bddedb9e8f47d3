package pool

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/wire"
)

// TestMinIdleOpensConnectionsAfterTheFirstAcquire: nothing is opened before a
// login used the node; then the pool keeps min_idle idle connections for it
// next to the one in use, and Close closes them.
func TestMinIdleOpensConnectionsAfterTheFirstAcquire(t *testing.T) {
	node, target, login := startPostgres(t)
	p := New(Options{MaxPerNode: 5, MinIdle: 3})
	defer p.Close()

	time.Sleep(2*maintenanceInterval + 100*time.Millisecond)
	if got := appBackends(t, node); got != 0 {
		t.Fatalf("%d backends of app before any acquire, want 0", got)
	}
	held, err := p.Acquire(context.Background(), target, login)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "3 idle connections next to the one in use", func() bool {
		inUse, idle := p.Stats(target.Node)
		return inUse == 1 && idle == 3
	})
	if got := appBackends(t, node); got != 4 {
		t.Fatalf("pg_stat_activity shows %d backends of app, want 4 (1 in use, 3 idle)", got)
	}
	if got := openCount(p, target.Node); got != 4 {
		t.Fatalf("open = %d, want 4", got)
	}
	p.Release(held, true)
	p.Close()
	waitFor(t, 5*time.Second, "no backend of app after Close", func() bool { return appBackends(t, node) == 0 })
}

// TestHealthCheckReplacesAConnectionKilledWhileIdle kills idle backends with
// pg_terminate_backend: Acquire detects them, goes on to the next idle
// connection or dials a new one, and the slot count stays right.
func TestHealthCheckReplacesAConnectionKilledWhileIdle(t *testing.T) {
	node, target, login := startPostgres(t)
	p := New(Options{MaxPerNode: 2, HealthCheckAfter: time.Millisecond})
	defer p.Close()
	ctx := context.Background()

	first, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(first, true)
	p.Release(second, true) // most recently used: handed out first
	terminateBackend(t, node, second.PID)

	got, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatalf("acquire after the idle backend was killed: %v", err)
	}
	if got != first {
		t.Fatalf("got the connection of backend %d, want the surviving idle one (%d)", got.PID, first.PID)
	}
	if err := runQuery(got, "SELECT 1"); err != nil {
		t.Fatalf("the connection handed out does not work: %v", err)
	}
	if open := openCount(p, target.Node); open != 1 {
		t.Fatalf("open = %d after the dead connection was dropped, want 1", open)
	}
	p.Release(got, true)

	// The only idle connection is dead: Acquire dials in its slot.
	terminateBackend(t, node, first.PID)
	fresh, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatalf("acquire after the last idle backend was killed: %v", err)
	}
	if fresh.PID == first.PID || fresh.PID == second.PID {
		t.Fatalf("got the killed backend %d again", fresh.PID)
	}
	if err := runQuery(fresh, "SELECT 1"); err != nil {
		t.Fatalf("the new connection does not work: %v", err)
	}
	if open := openCount(p, target.Node); open != 1 {
		t.Fatalf("open = %d with one connection in use, want 1", open)
	}
	p.Release(fresh, true)
	if inUse, idle := p.Stats(target.Node); inUse != 0 || idle != 1 {
		t.Fatalf("Stats = %d in use, %d idle; want 0, 1", inUse, idle)
	}
	// Both slots are free: the cap of 2 is reachable again.
	a, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatalf("second connection within the cap of 2: %v", err)
	}
	p.Release(a, true)
	p.Release(b, true)
}

// TestSuspectConnectionsAreCheckedWithoutARoundTrip: with the health check
// off, a connection whose backend was killed while idle is still not handed
// out once the node is suspect (Suspect, which the proxy calls when one of
// the node's connections turned out dead) or once it sat idle for longer
// than quietCheckAfter: the node's FATAL waiting on it gives it away.
func TestSuspectConnectionsAreCheckedWithoutARoundTrip(t *testing.T) {
	node, target, login := startPostgres(t)
	p := New(Options{MaxPerNode: 3})
	defer p.Close()
	ctx := context.Background()

	conns := openIdle(t, p, target, login, 3)
	// Two of the three die while idle, as in a restart that the third
	// (released later) did not see.
	terminateBackend(t, node, conns[1].PID)
	terminateBackend(t, node, conns[2].PID)
	p.Suspect(target.Node)
	got, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatalf("acquire with suspect idle connections: %v", err)
	}
	if got.PID != conns[0].PID {
		t.Fatalf("got backend %d, want the live idle one %d (the others were killed)", got.PID, conns[0].PID)
	}
	if err := runQuery(got, "SELECT 1"); err != nil {
		t.Fatalf("the connection handed out does not work: %v", err)
	}
	p.Release(got, true)

	// Not suspect, but idle for longer than quietCheckAfter.
	terminateBackend(t, node, got.PID)
	time.Sleep(quietCheckAfter + 100*time.Millisecond)
	fresh, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatalf("acquire after the idle backend was killed: %v", err)
	}
	if fresh.PID == got.PID {
		t.Fatalf("got the killed backend %d again", fresh.PID)
	}
	if err := runQuery(fresh, "SELECT 1"); err != nil {
		t.Fatalf("the new connection does not work: %v", err)
	}
	p.Release(fresh, true)
	if open := openCount(p, target.Node); open != 1 {
		t.Fatalf("open = %d after the dead connections were dropped, want 1", open)
	}
}

// TestIdleTimeoutClosesIdleConnectionsDownToMinIdle: idle connections go
// after idle_timeout without any traffic, except the last min_idle, which
// Acquire still hands out.
func TestIdleTimeoutClosesIdleConnectionsDownToMinIdle(t *testing.T) {
	node, target, login := startPostgres(t)
	p := New(Options{MaxPerNode: 5, MinIdle: 1, IdleTimeout: time.Second})
	defer p.Close()
	ctx := context.Background()

	openIdle(t, p, target, login, 3)
	waitFor(t, time.Second, "no background dial in flight", func() bool { return refillState(p, target.Node).inFlight == 0 })
	released := idlePIDs(p, target.Node) // the held ones, and one dialled for min_idle if a round came meanwhile
	waitFor(t, 5*time.Second, "idle connections closed down to min_idle", func() bool {
		inUse, idle := p.Stats(target.Node)
		return inUse == 0 && idle == 1
	})
	waitFor(t, 5*time.Second, "one backend of app left", func() bool { return appBackends(t, node) == 1 })
	time.Sleep(3 * maintenanceInterval)
	if _, idle := p.Stats(target.Node); idle != 1 {
		t.Fatalf("%d idle connections after further rounds, want min_idle (1)", idle)
	}
	kept := idlePIDs(p, target.Node)
	if !slices.Contains(released, kept[0]) {
		t.Fatalf("idle backend %d is not one of the released ones %v: min_idle was closed and dialled again", kept[0], released)
	}
	c, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	if c.PID != kept[0] {
		t.Fatalf("Acquire handed out backend %d instead of the kept idle one %d", c.PID, kept[0])
	}
	if open := openCount(p, target.Node); open != 1 {
		t.Fatalf("open = %d, want 1", open)
	}
	p.Release(c, true)
}

// TestMaxLifetimeReplacesIdleConnections: idle connections past
// max_lifetime are closed even below min_idle, and fresh ones replace them.
func TestMaxLifetimeReplacesIdleConnections(t *testing.T) {
	node, target, login := startPostgres(t)
	p := New(Options{MaxPerNode: 5, MinIdle: 2, MaxLifetime: 1500 * time.Millisecond})
	defer p.Close()

	c, err := p.Acquire(context.Background(), target, login)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(c, true)
	waitFor(t, 5*time.Second, "min_idle idle connections", func() bool {
		_, idle := p.Stats(target.Node)
		return idle == 2
	})
	original := idlePIDs(p, target.Node)
	waitFor(t, 6*time.Second, "2 idle connections, none of them the original ones", func() bool {
		now := idlePIDs(p, target.Node)
		return len(now) == 2 && !slices.ContainsFunc(now, func(pid uint32) bool { return slices.Contains(original, pid) })
	})
	waitFor(t, 5*time.Second, "the original backends gone", func() bool {
		for _, pid := range original {
			if backendExists(t, node, pid) {
				return false
			}
		}
		return true
	})
	if open := openCount(p, target.Node); open > 2 {
		t.Fatalf("open = %d with nothing in use and min_idle 2", open)
	}
}

// TestRefillBacksOffFromAStoppedNode: when the node is down, the background
// dials for min_idle pause for the backoff instead of retrying every round,
// give their slots back, and resume once the node is up again.
func TestRefillBacksOffFromAStoppedNode(t *testing.T) {
	node, target, login := startPostgres(t)
	p := New(Options{MaxPerNode: 5, MinIdle: 2, DialTimeout: time.Second})
	defer p.Close()
	const backoff = 2 * time.Second
	p.mu.Lock()
	p.refillBackoff = backoff
	p.mu.Unlock()
	ctx := context.Background()

	c, err := p.Acquire(ctx, target, login)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(c, true)
	waitFor(t, 5*time.Second, "min_idle idle connections", func() bool {
		_, idle := p.Stats(target.Node)
		return idle == 2 && refillState(p, target.Node).inFlight == 0
	})
	before := refillState(p, target.Node).attempts

	if err := node.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	p.CloseNode(target.Node) // what the proxy does when the monitor sees the node go
	waitFor(t, 5*time.Second, "a failed round of background dials", func() bool {
		s := refillState(p, target.Node)
		return s.attempts > before && s.inFlight == 0
	})
	failed := refillState(p, target.Node).attempts
	if failed-before > 2 {
		t.Fatalf("%d background dials in one round, want at most min_idle (2)", failed-before)
	}
	time.Sleep(backoff - 500*time.Millisecond) // 3 rounds, all within the backoff
	if got := refillState(p, target.Node).attempts; got != failed {
		t.Fatalf("%d more background dials to the stopped node within the backoff, want none", got-failed)
	}
	if open := openCount(p, target.Node); open != 0 {
		t.Fatalf("open = %d after the failed dials, want 0", open)
	}

	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, backoff+5*time.Second, "min_idle idle connections after the node came back", func() bool {
		_, idle := p.Stats(target.Node)
		return idle == 2
	})
	if got := appBackends(t, node); got != 2 {
		t.Fatalf("pg_stat_activity shows %d backends of app, want 2", got)
	}
}

// TestRefillDialledBeforeCloseNodeIsNotKept: a background dial that began
// before CloseNode is closed when it completes, and its slot is given back.
func TestRefillDialledBeforeCloseNodeIsNotKept(t *testing.T) {
	_, target, login := startPostgres(t)
	p := New(Options{MaxPerNode: 5, MinIdle: 2})
	defer p.Close()
	p.waitMaintenance() // rounds are run by hand below

	c, err := p.Acquire(context.Background(), target, login)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(c, true)
	p.refill(context.Background(), time.Now())
	if s := refillState(p, target.Node); s.inFlight != 1 {
		t.Fatalf("%d background dials in flight, want 1", s.inFlight)
	}
	p.CloseNode(target.Node) // while the dial authenticates
	p.maintenance.Wait()
	if inUse, idle := p.Stats(target.Node); inUse != 0 || idle != 0 {
		t.Fatalf("Stats = %d in use, %d idle after CloseNode; want 0, 0", inUse, idle)
	}
	if open := openCount(p, target.Node); open != 0 {
		t.Fatalf("open = %d, want 0", open)
	}
}

// TestRememberedLoginsAreBounded: at most maxRememberedLogins logins per
// node get min_idle connections, and each is remembered with its own copy
// of the startup parameters.
func TestRememberedLoginsAreBounded(t *testing.T) {
	p := New(Options{})
	defer p.Close()
	target := Target{Node: "pg1", Host: "127.0.0.1", Port: 1}
	params := map[string]string{"application_name": "first"}
	for i := range maxRememberedLogins + 10 {
		login := Login{User: fmt.Sprintf("user%d", i), Database: "postgres", Params: params}
		p.remember(target, login, login.key(), 0)
	}
	params["application_name"] = "changed"
	p.mu.Lock()
	defer p.mu.Unlock()
	logins := p.nodes["pg1"].logins
	if len(logins) != maxRememberedLogins {
		t.Fatalf("%d logins remembered, want %d", len(logins), maxRememberedLogins)
	}
	for _, login := range logins {
		if login.Params["application_name"] != "first" {
			t.Fatalf("a remembered login shares the caller's parameters: %v", login.Params)
		}
	}
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openCount returns the connections counted against the node's cap.
func openCount(p *Pool, node string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node(node).open
}

// idlePIDs returns the backend PIDs of the node's idle connections.
func idlePIDs(p *Pool, node string) []uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []uint32
	for _, list := range p.node(node).idle {
		for _, c := range list {
			pids = append(pids, c.PID)
		}
	}
	return pids
}

type refillCounts struct{ attempts, inFlight int }

// refillState returns the background dials to node started so far and in flight.
func refillState(p *Pool, node string) refillCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	np := p.node(node)
	return refillCounts{attempts: np.refillDials, inFlight: np.refillsInFlight()}
}

// appBackends counts the client backends of user app on node.
func appBackends(t *testing.T, node *cluster.Node) int {
	t.Helper()
	var n int
	err := node.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND backend_type = 'client backend'").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// backendExists reports whether pg_stat_activity lists the backend pid.
func backendExists(t *testing.T, node *cluster.Node, pid uint32) bool {
	t.Helper()
	var exists bool
	if err := node.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)", int32(pid)).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	return exists
}

// terminateBackend kills backend pid with pg_terminate_backend and waits until it is gone.
func terminateBackend(t *testing.T, node *cluster.Node, pid uint32) {
	t.Helper()
	var signalled bool
	if err := node.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&signalled); err != nil {
		t.Fatal(err)
	}
	if !signalled {
		t.Fatalf("pg_terminate_backend(%d) found no such backend", pid)
	}
	waitFor(t, 5*time.Second, fmt.Sprintf("backend %d to exit", pid), func() bool { return !backendExists(t, node, pid) })
}

// runQuery runs sql as a simple query on c and reads the replies up to ReadyForQuery.
func runQuery(c *Conn, sql string) error {
	c.NetConn().SetDeadline(time.Now().Add(5 * time.Second))
	defer c.NetConn().SetDeadline(time.Time{})
	if _, err := c.Writer.Write(wire.AppendFrame(nil, 'Q', append([]byte(sql), 0))); err != nil {
		return err
	}
	if err := c.Writer.Flush(); err != nil {
		return err
	}
	rows := 0
	for {
		typ, body, err := c.Reader.ReadFrame()
		if err != nil {
			return err
		}
		switch typ {
		case 'E':
			return decodeError(body)
		case 'D':
			rows++
		case 'Z':
			c.TxStatus = body[0]
			if rows == 0 {
				return fmt.Errorf("%q returned no row", sql)
			}
			return nil
		}
	}
}

// openIdle acquires n connections at once, so that each is a connection of
// its own, and releases them all: the pool then holds them idle. It returns
// them in the order they were acquired.
func openIdle(t *testing.T, p *Pool, target Target, login Login, n int) []*Conn {
	t.Helper()
	var conns []*Conn
	for range n {
		c, err := p.Acquire(context.Background(), target, login)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		p.Release(c, true)
	}
	return conns
}
