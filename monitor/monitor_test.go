package monitor_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/internal/syncbuf"
	"github.com/pgowl/pgowl/monitor"
	"github.com/pgowl/pgowl/route"
)

const (
	testInterval = 100 * time.Millisecond
	// snapshotWait bounds every wait for an observed snapshot.
	snapshotWait = 20 * time.Second
)

type runningMonitor struct {
	*monitor.Monitor
	opts monitor.Options
	logs *syncbuf.Buffer
}

// startMonitor runs a monitor over nodes until t ends and waits for its first round.
func startMonitor(t *testing.T, nodes []monitor.NodeAddr, tune func(*monitor.Options)) *runningMonitor {
	t.Helper()
	logs := &syncbuf.Buffer{}
	opts := monitor.Options{
		Nodes:        nodes,
		User:         "postgres",
		Interval:     testInterval,
		DownAfter:    500 * time.Millisecond,
		QueryTimeout: time.Second,
		Logger:       zerolog.New(logs).With().Timestamp().Logger(),
	}
	if tune != nil {
		tune(&opts)
	}
	m := monitor.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of cancellation")
		}
		if t.Failed() {
			t.Logf("monitor log:\n%s", logs.String())
		}
	})
	readyCtx, readyCancel := context.WithTimeout(context.Background(), snapshotWait)
	defer readyCancel()
	if err := m.Ready(readyCtx); err != nil {
		t.Fatalf("monitor not ready: %v", err)
	}
	return &runningMonitor{Monitor: m, opts: opts, logs: logs}
}

// waitFor waits until cond holds for a published snapshot and returns that snapshot.
func (m *runningMonitor) waitFor(t *testing.T, what string, cond func(*route.Snapshot) bool) *route.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), snapshotWait)
	defer cancel()
	var matched *route.Snapshot
	ok := m.WaitFor(ctx, func(s *route.Snapshot) bool {
		if cond(s) {
			matched = s
			return true
		}
		return false
	})
	if !ok {
		t.Fatalf("timed out after %s waiting for %s; last snapshot:\n%s", snapshotWait, what, describe(m.Snapshot()))
	}
	return matched
}

// nextSnapshots returns the next count snapshots published after now.
func (m *runningMonitor) nextSnapshots(t *testing.T, count int) []*route.Snapshot {
	t.Helper()
	var seen []*route.Snapshot
	last := m.Snapshot()
	m.waitFor(t, fmt.Sprintf("%d new snapshots", count), func(s *route.Snapshot) bool {
		if s != last {
			seen = append(seen, s)
			last = s
		}
		return len(seen) >= count
	})
	return seen
}

func node(s *route.Snapshot, name string) route.NodeState {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n
		}
	}
	return route.NodeState{}
}

func describe(s *route.Snapshot) string {
	var b strings.Builder
	for _, n := range s.Nodes {
		fmt.Fprintf(&b, "  %s up=%v role=%s tl=%d lag_known=%v lag=%s bytes=%d age=%s err=%q\n",
			n.Name, n.Up, n.Role, n.Timeline, n.LagKnown, n.Lag, n.LagBytes, s.TakenAt.Sub(n.SampledAt), n.LastError)
	}
	return b.String()
}

func caughtUp(name string) func(*route.Snapshot) bool {
	return func(s *route.Snapshot) bool {
		n := node(s, name)
		return n.Up && n.Role == route.RoleStandby && n.LagKnown && n.Lag == 0 && n.LagBytes == 0
	}
}

// TestIdlePrimaryCaughtUpStandbyHasZeroLag checks that an idle primary does
// not make a caught-up standby look lagged, round after round, and that
// nothing is logged per poll.
func TestIdlePrimaryCaughtUpStandbyHasZeroLag(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	pg1, pg2 := c.Nodes[0], c.Nodes[1]
	m := startMonitor(t, []monitor.NodeAddr{pg1.Addr(), pg2.Addr()}, nil)

	first := m.Snapshot()
	if p := node(first, "pg1"); !p.Up || p.Role != route.RolePrimary || p.Timeline != 1 || !p.LagKnown {
		t.Fatalf("after Ready, pg1 is not an up primary on timeline 1:\n%s", describe(first))
	}
	if s := node(first, "pg2"); !s.Up || s.Role != route.RoleStandby || !s.LagKnown {
		t.Fatalf("after Ready, pg2 is not an up standby with known lag:\n%s", describe(first))
	}

	// Background WAL (a running-xacts record, autovacuum) may move the
	// primary during a window; only a window in which the primary's
	// position did not move proves the point, so retry a few windows.
	const rounds = 15
	for attempt := 1; ; attempt++ {
		pg2.WaitCaughtUp(t, pg1)
		m.waitFor(t, "pg2 caught up", caughtUp("pg2"))
		before := pg1.QueryString(t, "SELECT pg_current_wal_lsn()::text")
		logsBefore := m.logs.String()
		snaps := m.nextSnapshots(t, rounds)
		after := pg1.QueryString(t, "SELECT pg_current_wal_lsn()::text")
		if before != after {
			if attempt == 5 {
				t.Fatalf("the primary's WAL moved in %d windows of %d rounds; cannot observe an idle primary", attempt, rounds)
			}
			t.Logf("primary WAL moved from %s to %s during window %d; retrying", before, after, attempt)
			continue
		}
		flushed := pg1.QueryString(t, "SELECT pg_current_wal_flush_lsn()::text")
		samples := map[time.Time]bool{}
		for i, s := range snaps {
			n := node(s, "pg2")
			if !n.Up || !n.LagKnown || n.Lag != 0 || n.LagBytes != 0 {
				t.Fatalf("snapshot %d of an idle primary: pg2 not at lag 0:\n%s", i, describe(s))
			}
			// The primary's flush position comes with its sample (read your
			// writes compares it); a standby has none.
			if p := node(s, "pg1"); p.FlushPosition.String() != flushed || n.FlushPosition != 0 {
				t.Fatalf("snapshot %d of an idle primary: flush positions pg1 %s (want %s), pg2 %s (want 0)", i, p.FlushPosition, flushed, n.FlushPosition)
			}
			samples[n.SampledAt] = true
		}
		if len(samples) < rounds/2 {
			t.Fatalf("only %d distinct pg2 samples in %d snapshots: the standby is not being polled", len(samples), rounds)
		}
		if logsAfter := m.logs.String(); logsAfter != logsBefore {
			t.Fatalf("the monitor logged during %d unchanged rounds:\n%s", rounds, strings.TrimPrefix(logsAfter, logsBefore))
		}
		return
	}
}

// TestPausedReplayLagGrowsAndRecovers pauses replay on the standby, writes on
// the primary, and checks that the lag grows past a second with unreplayed
// bytes, then returns to 0 once replay resumes.
func TestPausedReplayLagGrowsAndRecovers(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	pg1, pg2 := c.Nodes[0], c.Nodes[1]
	pg1.Exec(t, "CREATE TABLE monitor_lag (id int)")
	pg2.WaitCaughtUp(t, pg1)
	m := startMonitor(t, []monitor.NodeAddr{pg1.Addr(), pg2.Addr()}, nil)
	m.waitFor(t, "pg2 caught up", caughtUp("pg2"))

	pg2.Exec(t, "SELECT pg_wal_replay_pause()")
	writeStarted := time.Now()
	pg1.Exec(t, "INSERT INTO monitor_lag SELECT generate_series(1, 1000)")

	lagged := m.waitFor(t, "pg2 lag above 1s", func(s *route.Snapshot) bool {
		n := node(s, "pg2")
		return n.LagKnown && n.Lag > time.Second
	})
	n := node(lagged, "pg2")
	if !n.Up || n.LagBytes == 0 {
		t.Fatalf("lagging standby should be up with unreplayed bytes:\n%s", describe(lagged))
	}
	// The lag counts from the first primary sample after the write, so it
	// cannot exceed the time since the write began (plus one poll's slack).
	if limit := lagged.TakenAt.Sub(writeStarted) + testInterval; n.Lag > limit {
		t.Fatalf("lag %s exceeds the %s elapsed since the write", n.Lag, limit)
	}
	// While paused, the lag keeps growing with time.
	later := m.waitFor(t, "pg2 lag to grow", func(s *route.Snapshot) bool {
		return node(s, "pg2").Lag >= n.Lag+3*testInterval
	})
	if node(later, "pg2").LagBytes != n.LagBytes {
		t.Fatalf("unreplayed bytes changed while replay was paused and the primary idle: %d then %d", n.LagBytes, node(later, "pg2").LagBytes)
	}

	pg2.Exec(t, "SELECT pg_wal_replay_resume()")
	m.waitFor(t, "pg2 back to lag 0", caughtUp("pg2"))
}

// TestStoppedStandbyGoesDown stops a standby and checks it is marked down
// within DownAfter plus one interval of its last answer, with its lag unknown
// and an error recorded; then restarts it and checks it comes back.
func TestStoppedStandbyGoesDown(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	pg1, pg2 := c.Nodes[0], c.Nodes[1]
	m := startMonitor(t, []monitor.NodeAddr{pg1.Addr(), pg2.Addr()}, nil)
	m.waitFor(t, "pg2 caught up", caughtUp("pg2"))

	pg2.Stop(t)
	stopped := time.Now() // pg2 cannot have answered after this
	down := m.waitFor(t, "pg2 down", func(s *route.Snapshot) bool { return !node(s, "pg2").Up })
	// Scheduling slack on top of the documented bound: publishing runs on a ticker.
	const slack = 50 * time.Millisecond
	if bound := m.opts.DownAfter + m.opts.Interval + slack; down.TakenAt.Sub(stopped) > bound {
		t.Fatalf("pg2 marked down %s after it stopped, want within %s", down.TakenAt.Sub(stopped), bound)
	}
	t.Logf("pg2 marked down %s after pg_ctl stop returned", down.TakenAt.Sub(stopped).Round(time.Millisecond))
	n := node(down, "pg2")
	if n.LagKnown || n.LastError == "" {
		t.Fatalf("down standby should have unknown lag and an error:\n%s", describe(down))
	}
	if p := node(down, "pg1"); !p.Up || p.Role != route.RolePrimary {
		t.Fatalf("the primary should stay up:\n%s", describe(down))
	}
	if !strings.Contains(m.logs.String(), `"node is down"`) {
		t.Fatalf("no log line for pg2 going down:\n%s", m.logs.String())
	}

	pg2.Start(t)
	m.waitFor(t, "pg2 back up and caught up", caughtUp("pg2"))
}

// TestPromotionChangesRoleAndTimeline promotes the standby and checks that it
// becomes a primary and, once the promotion's checkpoint completes, moves to a
// higher timeline, which settles the split brain in its favour.
func TestPromotionChangesRoleAndTimeline(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	pg1, pg2 := c.Nodes[0], c.Nodes[1]
	m := startMonitor(t, []monitor.NodeAddr{pg1.Addr(), pg2.Addr()}, nil)
	before := m.waitFor(t, "pg2 caught up", caughtUp("pg2"))
	oldTimeline := node(before, "pg2").Timeline

	pg2.Promote(t)
	m.waitFor(t, "pg2 to become a primary", func(s *route.Snapshot) bool {
		n := node(s, "pg2")
		return n.Up && n.Role == route.RolePrimary
	})
	// The timeline is read from the last checkpoint; force the one the
	// promotion requested to finish now instead of spread out.
	checkpointStarted := time.Now()
	pg2.Exec(t, "CHECKPOINT")
	t.Logf("CHECKPOINT on pg2 took %s", time.Since(checkpointStarted).Round(time.Millisecond))
	promoted := m.waitFor(t, "pg2 on a higher timeline", func(s *route.Snapshot) bool {
		return node(s, "pg2").Timeline > oldTimeline
	})
	primary, err := route.Primary(promoted, route.Policy{DownAfter: m.opts.DownAfter}, promoted.TakenAt)
	if err != nil || promoted.Nodes[primary].Name != "pg2" {
		t.Fatalf("with pg1 on timeline %d and pg2 on %d, route.Primary = %d, %v; want pg2:\n%s",
			node(promoted, "pg1").Timeline, node(promoted, "pg2").Timeline, primary, err, describe(promoted))
	}
	if !strings.Contains(m.logs.String(), `"node role changed"`) || !strings.Contains(m.logs.String(), `"node timeline changed"`) {
		t.Fatalf("role and timeline changes not logged:\n%s", m.logs.String())
	}
}

// TestHungNodeDoesNotDelayOthers adds a node that accepts connections and
// never answers, and checks that the primary is still sampled every interval.
func TestHungNodeDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0)
	hung := blackHole(t)
	m := startMonitor(t, []monitor.NodeAddr{c.Nodes[0].Addr(), hung}, func(o *monitor.Options) {
		o.QueryTimeout = 3 * time.Second
		o.DialTimeout = 3 * time.Second
		o.DownAfter = time.Second
	})
	// The first round (before Ready) waits for every node by design; count
	// the primary's samples after it.
	const samples = 10
	times := []time.Time{node(m.Snapshot(), "pg1").SampledAt}
	m.waitFor(t, fmt.Sprintf("%d primary samples", samples), func(s *route.Snapshot) bool {
		if at := node(s, "pg1").SampledAt; at.After(times[len(times)-1]) {
			times = append(times, at)
		}
		return len(times) > samples
	})
	times = times[1:]
	// With rounds held up by the hung node, samples would be 3s apart.
	span, limit := times[len(times)-1].Sub(times[0]), 3*(samples-1)*testInterval
	if span > limit {
		t.Fatalf("%d primary samples took %s, want at most %s: the hung node delays the primary", samples, span, limit)
	}
	t.Logf("%d primary samples spanned %s next to a hung node", samples, span.Round(time.Millisecond))
	s := m.Snapshot()
	if n := node(s, "hung"); n.Up || n.Role != route.RoleUnknown || n.LastError == "" {
		t.Fatalf("the hung node should be down with unknown role and an error:\n%s", describe(s))
	}
	// Its failed polls are logged once, as a state, not once per poll.
	var hungLines []string
	for _, line := range strings.Split(m.logs.String(), "\n") {
		if strings.Contains(line, `"node":"hung"`) {
			hungLines = append(hungLines, line)
		}
	}
	if len(hungLines) != 1 || !strings.Contains(hungLines[0], `"node is down"`) {
		t.Fatalf("want exactly one log line for the hung node, saying it is down; got:\n%s", strings.Join(hungLines, "\n"))
	}
}

// blackHole listens on a free port, accepts connections and never answers,
// until the test ends.
func blackHole(t *testing.T) monitor.NodeAddr {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range conns {
			conn.Close()
		}
	})
	return monitor.NodeAddr{Name: "hung", Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port}
}
