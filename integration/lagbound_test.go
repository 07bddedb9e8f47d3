package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// lbEpsilon is the allowance on top of max_replica_lag + one monitor
// interval for the read's own time.
const lbEpsilon = 50 * time.Millisecond

// lbRead is one read of the property test that a standby served.
type lbRead struct {
	phase  string
	start  time.Time
	end    time.Time
	newest time.Time // the newest stamp the read saw
	lagMS  int64     // the NOTICE's lag_ms
	node   string
	// staleness is how long before the read ended the primary committed the
	// first row the read did not see (0 if it saw every row committed by
	// then): the age of the data it returned.
	staleness time.Duration
}

// lbStampWriter inserts rows stamped with clock_timestamp() on the primary,
// one autocommitted row at a time, and remembers every stamp.
type lbStampWriter struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	stamps []time.Time // in commit order
	err    error       // written before done is closed
}

// lbStartStampWriter runs setup, then inserts a row and pauses for pause, until
// stopped or limit or maxRows is reached.
func lbStartStampWriter(t *testing.T, node *cluster.Node, setup string, limit time.Duration, maxRows int, pause time.Duration) *lbStampWriter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	conn, err := node.Connect(ctx)
	if err != nil {
		cancel()
		t.Fatalf("writer: %v", err)
	}
	if _, err := conn.Exec(ctx, setup); err != nil {
		cancel()
		conn.Close(context.Background())
		t.Fatalf("writer: %s: %v", setup, err)
	}
	w := &lbStampWriter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer func() {
			closeCtx, closeCancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer closeCancel()
			conn.Close(closeCtx)
		}()
		for range maxRows {
			var stamp time.Time
			if err := conn.QueryRow(ctx, "INSERT INTO lb_stamps (stamp) VALUES (clock_timestamp()) RETURNING stamp").Scan(&stamp); err != nil {
				if ctx.Err() == nil {
					w.err = err
				}
				return
			}
			w.mu.Lock()
			w.stamps = append(w.stamps, stamp)
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the writer and returns every stamp it committed, and its error.
func (w *lbStampWriter) stop() ([]time.Time, error) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stamps, w.err
}

// lbGapWatcher records the longest gap between two consecutive samples of one
// node in a pgowl instance's snapshots: the monitor's lag bound is relative
// to that gap, which is one interval unless the host is slow.
type lbGapWatcher struct {
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	longest time.Duration // read after done is closed
}

// lbWatchGaps starts watching o's samples of node.
func lbWatchGaps(o *owl, node string) *lbGapWatcher {
	g := &lbGapWatcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		var last time.Time
		ticker := time.NewTicker(5 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-ticker.C:
			}
			n := findNode(o.states.Snapshot(), node)
			if n == nil || n.SampledAt.Equal(last) {
				continue
			}
			if !last.IsZero() {
				g.longest = max(g.longest, n.SampledAt.Sub(last))
			}
			last = n.SampledAt
		}
	}()
	return g
}

// finish stops the watcher and returns the longest gap seen; it may be called more than once.
func (g *lbGapWatcher) finish() time.Duration {
	g.once.Do(func() { close(g.stop) })
	<-g.done
	return g.longest
}

// TestLagBoundProperty checks pgowl's promise about stale reads as a
// property: while a writer stamps rows with clock_timestamp() on the
// primary, and replay on the standby is paused and resumed to create lag, no
// read that a standby serves through pgowl returns data older than
// routing.max_replica_lag + one monitor interval (+ lbEpsilon). All runs on
// one host, so the database's and the test's clocks agree. "One interval" is
// the longest gap between the primary's samples actually seen, normally the
// configured 100ms.
//
// The writer runs once with synchronous_commit on and once with the
// harness's default, off: an asynchronous commit is visible on the primary
// before its WAL is written, and the lag is measured from WAL positions.
//
// It uses the shared cluster's pg1 and pg2 only (pgowl is not told about
// pg3), and undoes every pause also when it fails.
func TestLagBoundProperty(t *testing.T) {
	c := sharedClusterFor(t)
	o := foStartOwlOn(t, c, []string{c.Nodes[0].Name, c.Nodes[1].Name}, nil)
	t.Cleanup(func() { _ = c.Nodes[1].ResumeReplay(context.Background()) })
	createTable(t, c, "lb_stamps", "CREATE TABLE lb_stamps (id bigserial PRIMARY KEY, stamp timestamptz NOT NULL); INSERT INTO lb_stamps (stamp) VALUES (clock_timestamp())")
	var summary []string
	for _, mode := range []string{"on", "off"} {
		t.Run("synchronous_commit_"+mode, func(t *testing.T) {
			summary = append(summary, lbRun(t, c, o, "SET synchronous_commit = "+mode))
		})
	}
	t.Logf("LAG-BOUND summary:\n%s", strings.Join(summary, "\n"))
}

// lbRun runs the property test once with a writer set up by setup and
// returns a one-line summary.
func lbRun(t *testing.T, c *cluster.Cluster, o *owl, setup string) string {
	standby := c.Nodes[1]
	conn := o.connect(t, foSimple)
	ctx := timeoutCtx(t, time.Minute)
	gaps := lbWatchGaps(o, c.Nodes[0].Name)
	defer gaps.finish()

	// One row, then a 5ms pause, for at most 20s or 4000 rows: an
	// application's pace, at which an asynchronous commit's WAL waits for
	// the WAL writer rather than for a full page.
	writer := lbStartStampWriter(t, c.Nodes[0], setup, 20*time.Second, 4000, 5*time.Millisecond)

	var (
		began      = time.Now()
		served     []lbRead
		refused    = map[string]int{}
		refusedAll int
		phase      string
	)
	// read runs one read and reports whether a standby served it.
	read := func() (ok bool) {
		var newest time.Time
		res := conn.foTryRead(t, ctx, "SELECT max(stamp) FROM lb_stamps", &newest)
		switch {
		case res.err == nil:
			if !res.routed || res.route.Role != "standby" {
				t.Errorf("%s: a read ran, but not on a standby: %s", phase, res.describe())
				return false
			}
			served = append(served, lbRead{phase: phase, start: res.start, end: res.end, newest: newest, lagMS: res.route.LagMS, node: res.route.Node})
			if res.route.LagMS > foMaxLag.Milliseconds() {
				t.Errorf("%s: NOTICE lag_ms %d beyond max lag %s", phase, res.route.LagMS, foMaxLag)
			}
			return true
		case res.owlError("REPLICA_LAG_EXCEEDED"), res.owlError("NO_READABLE_REPLICA"):
			refused[phase]++
			refusedAll++
			return false
		default:
			t.Fatalf("%s: unexpected %s", phase, res.describe())
			return false
		}
	}
	// readFor reads until d has passed, or until stop (if not nil) holds after a read.
	readFor := func(name string, d time.Duration, stop func(ok bool) bool) bool {
		phase = name
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			ok := read()
			if stop != nil && stop(ok) {
				return true
			}
			time.Sleep(2 * time.Millisecond) // pacing between reads
		}
		return stop == nil
	}

	readFor("steady", 1500*time.Millisecond, nil)
	for cycle := 1; cycle <= 2; cycle++ {
		if err := standby.PauseReplay(ctx); err != nil {
			t.Fatalf("pause replay: %v", err)
		}
		pausedAt := time.Now()
		if !readFor(fmt.Sprintf("cycle %d paused", cycle), 10*time.Second, func(ok bool) bool { return !ok }) {
			t.Fatalf("cycle %d: no read was refused within 10s of pausing replay", cycle)
		}
		t.Logf("cycle %d: first refusal %s after the pause", cycle, time.Since(pausedAt).Round(time.Millisecond))
		readFor(fmt.Sprintf("cycle %d refusing", cycle), 300*time.Millisecond, nil)
		if err := standby.ResumeReplay(ctx); err != nil {
			t.Fatalf("resume replay: %v", err)
		}
		resumedAt := time.Now()
		if !readFor(fmt.Sprintf("cycle %d resumed", cycle), 10*time.Second, func(ok bool) bool { return ok }) {
			t.Fatalf("cycle %d: no read was served within 10s of resuming replay", cycle)
		}
		t.Logf("cycle %d: reads served again %s after the resume", cycle, time.Since(resumedAt).Round(time.Millisecond))
		readFor(fmt.Sprintf("cycle %d caught up", cycle), time.Second, nil)
	}
	interval := max(foInterval, gaps.finish()).Round(time.Millisecond)
	bound := foMaxLag + interval + lbEpsilon
	stamps, err := writer.stop()
	if err != nil {
		t.Errorf("the writer failed after %d rows: %v", len(stamps), err)
	}
	if len(served) == 0 {
		t.Fatalf("no read was served")
	}

	// Each read's staleness, now that every committed stamp is known. A
	// stamp is taken just before its row commits, so this errs long.
	var looseWorst time.Duration
	for i := range served {
		r := &served[i]
		looseWorst = max(looseWorst, r.end.Sub(r.newest))
		next := sort.Search(len(stamps), func(j int) bool { return stamps[j].After(r.newest) })
		if next < len(stamps) && stamps[next].Before(r.end) {
			r.staleness = r.end.Sub(stamps[next])
		}
	}

	byStaleness := append([]lbRead(nil), served...)
	sort.Slice(byStaleness, func(i, j int) bool { return byStaleness[i].staleness > byStaleness[j].staleness })
	worst := byStaleness[0]
	phaseMax := map[string]time.Duration{}
	var phases []string
	var underestimate time.Duration
	var violations, understated []string
	for _, r := range served {
		if _, seen := phaseMax[r.phase]; !seen {
			phases = append(phases, r.phase)
		}
		phaseMax[r.phase] = max(phaseMax[r.phase], r.staleness)
		lag := time.Duration(r.lagMS) * time.Millisecond
		underestimate = max(underestimate, r.staleness-lag)
		desc := fmt.Sprintf("%s with lag_ms %d at +%s (%s)", r.staleness.Round(time.Millisecond), r.lagMS, r.start.Sub(began).Round(time.Millisecond), r.phase)
		if r.staleness > bound {
			violations = append(violations, desc)
		}
		// The monitor's documented bound: a lag is short of the true
		// staleness by less than one interval, and the router adds the
		// sample's age, so data is at most lag_ms + one interval old.
		if r.staleness > lag+interval+lbEpsilon {
			understated = append(understated, desc)
		}
	}
	for _, p := range phases {
		t.Logf("phase %-18s max staleness %6s, refused %d", p, phaseMax[p].Round(time.Millisecond), refused[p])
	}
	for i, r := range byStaleness[:min(3, len(byStaleness))] {
		t.Logf("worst #%d: staleness %s at +%s (%s) on %s, NOTICE lag_ms %d", i+1, r.staleness.Round(time.Millisecond), r.start.Sub(began).Round(time.Millisecond), r.phase, r.node, r.lagMS)
	}
	line := fmt.Sprintf("LAG-BOUND (%s): worst staleness %s (bound %s = max_replica_lag %s + longest primary sample gap %s + epsilon %s); "+
		"%d reads served by the standby, %d refused, %d beyond the bound; %d rows written; steady-state max staleness %s; "+
		"largest staleness minus NOTICE lag_ms %s (%d reads beyond lag_ms + interval + epsilon); worst read end minus newest stamp seen %s",
		setup, worst.staleness.Round(time.Millisecond), bound, foMaxLag, interval, lbEpsilon,
		len(served), refusedAll, len(violations), len(stamps), phaseMax["steady"].Round(time.Millisecond),
		underestimate.Round(time.Millisecond), len(understated), looseWorst.Round(time.Millisecond))
	t.Log(line)
	if len(violations) > 0 {
		t.Errorf("%d read(s) served data older than %s: %v", len(violations), bound, violations[:min(5, len(violations))])
	}
	if len(understated) > 0 {
		t.Errorf("%d read(s) served data older than their NOTICE's lag_ms + interval %s + epsilon %s (largest excess of staleness over lag_ms: %s): %v",
			len(understated), interval, lbEpsilon, underestimate.Round(time.Millisecond), understated[:min(5, len(understated))])
	}
	if refusedAll == 0 {
		t.Errorf("no read was refused although replay was paused past the lag limit")
	}
	return line
}
