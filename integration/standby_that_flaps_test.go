package integration

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
)

// Bounds of TestAStandbyThatFlapsIsLeftAndTakenBackWithoutFailingAClient.
const (
	// flapCount is how often the standby is stopped and started.
	flapCount = 3
	// flapSeenDownWithin bounds the time from the end of the standby's stop to
	// the monitor's snapshot showing it down: monitor.down_after (1s) after
	// its last answered poll, plus a poll interval and a margin.
	flapSeenDownWithin = 3 * time.Second
	// flapReadAfterStopWithin bounds a read sent right after the end of the
	// standby's stop, before the monitor may have noticed it.
	flapReadAfterStopWithin = 3 * time.Second
	// flapUsedAgainWithin bounds the time from the end of the standby's start
	// to a read running on it again.
	flapUsedAgainWithin = 10 * time.Second
	// flapChurnReadsPerWrite is how many reads the background client runs
	// after each write, flapChurnPause apart: the first ones go to the primary
	// until a standby has replayed the write (read your writes), the later
	// ones to the standbys.
	flapChurnReadsPerWrite = 8
	flapChurnPause         = 30 * time.Millisecond
	// flapChurnMaxRounds and flapChurnMaxTime bound the background client.
	flapChurnMaxRounds = 2000
	flapChurnMaxTime   = 50 * time.Second
)

// flapOp is one statement the background client ran through pgowl.
type flapOp struct {
	write      bool
	start, end time.Time
	routes     []routeNotice
	ranOn      string // the node whose port the statement reported, "" if unknown
	count      int64  // a read: the client's own rows it saw
	want       int64  // a read: the client's own rows committed before it, -1 if unknown
	err        error
	closed     bool // the client's connection was closed after it
}

// flapEvent is a moment of the flaps, for saying when a statement ran.
type flapEvent struct {
	at   time.Time
	what string
}

// flapTimeline records the flaps' moments; it is written by the test's
// goroutine and read once the background client has stopped.
type flapTimeline struct {
	events []flapEvent
	// down are the windows [end of a stop, start of the next start] in which
	// the standby could not run anything.
	down [][2]time.Time
	// stopping are the windows [start, end] of the standby's shutdowns.
	stopping [][2]time.Time
}

func (tl *flapTimeline) mark(what string) time.Time {
	now := time.Now()
	tl.events = append(tl.events, flapEvent{at: now, what: what})
	return now
}

// when says when at was, relative to the latest flap event before it.
func (tl *flapTimeline) when(at time.Time) string {
	last := flapEvent{what: "the test began"}
	for _, e := range tl.events {
		if e.at.After(at) {
			break
		}
		last = e
	}
	if last.at.IsZero() {
		return "before the first flap"
	}
	return fmt.Sprintf("%s after %s", at.Sub(last.at).Round(time.Millisecond), last.what)
}

// inDown reports whether [start, end] lies within a window in which the standby was stopped.
func (tl *flapTimeline) inDown(start, end time.Time) bool {
	for _, w := range tl.down {
		if !start.Before(w[0]) && !end.After(w[1]) {
			return true
		}
	}
	return false
}

// overlapsStop reports whether [start, end] overlaps a shutdown of the standby.
func (tl *flapTimeline) overlapsStop(start, end time.Time) bool {
	for _, w := range tl.stopping {
		if !end.Before(w[0]) && !start.After(w[1]) {
			return true
		}
	}
	return false
}

// flapLostConnection reports whether err is pgowl's 08006 for a statement
// whose connection to node was lost while it ran.
func flapLostConnection(err error, node string) bool {
	pgErr, ok := asPgError(err)
	return ok && pgErr.Code == "08006" && strings.HasPrefix(pgErr.Message, "pgowl: lost the connection to "+node+" ")
}

// flapDescribeError describes err with its SQLSTATE, message and DETAIL.
func flapDescribeError(err error) string {
	if pgErr, ok := asPgError(err); ok {
		return fmt.Sprintf("SQLSTATE %s %q, DETAIL %q", pgErr.Code, pgErr.Message, pgErr.Detail)
	}
	return err.Error()
}

// TestAStandbyThatFlapsIsLeftAndTakenBackWithoutFailingAClient stops
// (fast shutdown) and starts one of two standbys three times while a client
// keeps writing and reading through pgowl (round-robin standby choice,
// otherwise the defaults: routing.when_no_standby reject, read your writes
// per session). It checks what an operator expects of a standby that flaps:
//
//   - every write succeeds on the primary, through and between the flaps;
//   - every read succeeds, on a standby the monitor has up and within the lag
//     limit, or on the primary only with READ_YOUR_WRITES (the client's own
//     last write not yet replayed); no read is refused, since the other
//     standby stays up, and none runs on the stopped standby; the routing
//     NOTICE names the node that ran it (the node's own port says which),
//     every read sees all the client's earlier writes, and the client's
//     connection is never closed. The one exception is a read running on
//     the standby when its shutdown ends it: having already passed its
//     RowDescription to the client it may not be sent again (README, "Dead
//     backends"), so it may fail with 08006 "lost the connection", but only
//     that, and its session goes on; before each stop such a read is started
//     on the standby on purpose, and the same session's next read, sent at
//     once, must run on the other standby;
//   - the monitor's snapshot shows the standby down within monitor.down_after
//     and a margin of each stop, and up again, with a known lag within the
//     limit, after each start;
//   - while the standby is down, reads of a client that does not write run on
//     the other standby; after each start such reads run on the restarted
//     standby again within a bounded time (its pooled connections, closed by
//     the shutdown, do not fail them).
func TestAStandbyThatFlapsIsLeftAndTakenBackWithoutFailingAClient(t *testing.T) {
	c := ownCluster(t, 2)
	primary, flapping, steady := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	createTable(t, c, "flap_rows", "CREATE TABLE flap_rows (id bigserial PRIMARY KEY, who text NOT NULL)")
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.StandbyChoice = config.StandbyRoundRobin
	})
	maxLag := o.cfg.Routing.MaxReplicaLag
	nodeOfPort := map[string]string{}
	for _, n := range c.Nodes {
		nodeOfPort[strconv.Itoa(n.Port)] = n.Name
	}
	ctx := timeoutCtx(t, 55*time.Second)
	tl := &flapTimeline{}

	// The background client: one simple-protocol connection that writes a
	// row, then reads its own rows several times (each read sleeps 20ms, so
	// that reads are in flight when the standby stops), until the flaps end.
	churn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	var (
		ops       []flapOp
		churnDone = make(chan struct{})
		churnEnd  = make(chan struct{})
	)
	go func() {
		defer close(churnEnd)
		var written int64 // the client's rows known committed; -1 once a write's outcome is unknown
		began := time.Now()
		for round := 0; round < flapChurnMaxRounds && time.Since(began) < flapChurnMaxTime; round++ {
			select {
			case <-churnDone:
				return
			default:
			}
			for step := 0; step < flapChurnReadsPerWrite+1; step++ {
				op := flapOp{write: step == 0, start: time.Now(), want: written}
				opCtx, cancel := context.WithTimeout(ctx, statementTimeout)
				var port string
				if op.write {
					op.err = churn.QueryRow(opCtx, "INSERT INTO flap_rows (who) VALUES ('churn') RETURNING current_setting('port')").Scan(&port)
					switch {
					case op.err == nil && written >= 0:
						written++
					case op.err != nil:
						written = -1
					}
				} else {
					op.err = churn.QueryRow(opCtx, "SELECT current_setting('port'), (SELECT count(*) FROM flap_rows WHERE who = 'churn'), pg_sleep(0.02)::text").Scan(&port, &op.count, new(string))
				}
				cancel()
				op.end = time.Now()
				op.routes = churn.routes(t)
				op.ranOn = nodeOfPort[port]
				op.closed = churn.PgConn().IsClosed()
				ops = append(ops, op)
				if op.closed {
					return
				}
				time.Sleep(flapChurnPause)
			}
		}
	}()
	stopChurn := func() {
		select {
		case <-churnDone:
		default:
			close(churnDone)
		}
		<-churnEnd
	}
	// Registered after the client's connection: runs before it is closed.
	t.Cleanup(stopChurn)

	// The foreground clients: a reader that never writes (so read your writes
	// never sends its reads to the primary), over the extended protocol with
	// cached prepared statements, and a writer.
	reader := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	writer := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	read := func(what string) routeNotice {
		t.Helper()
		var port string
		err := reader.QueryRow(ctx, "SELECT current_setting('port')").Scan(&port)
		rs := reader.routes(t)
		if err != nil {
			t.Fatalf("%s (%s): the read failed: %v (NOTICEs %v, connection closed: %t)", what, tl.when(time.Now()), err, rs, reader.PgConn().IsClosed())
		}
		if len(rs) != 1 {
			t.Fatalf("%s: got NOTICEs %v, want exactly one", what, rs)
		}
		r := rs[0]
		if r.Role != "standby" || r.Reason != "READ_ONLY" || r.Node != nodeOfPort[port] {
			t.Errorf("%s (%s): NOTICE %v, but it ran on %s: want a standby, READ_ONLY, and the NOTICE naming the node that ran it",
				what, tl.when(time.Now()), r, nodeOfPort[port])
		}
		return r
	}
	write := func(what string) {
		t.Helper()
		var port string
		err := writer.QueryRow(ctx, "INSERT INTO flap_rows (who) VALUES ('writer') RETURNING current_setting('port')").Scan(&port)
		rs := writer.routes(t)
		if err != nil {
			t.Fatalf("%s (%s): the write failed: %v (NOTICEs %v)", what, tl.when(time.Now()), err, rs)
		}
		if len(rs) != 1 || rs[0].Node != primary.Name || rs[0].Role != "primary" || nodeOfPort[port] != primary.Name {
			t.Errorf("%s: NOTICEs %v, ran on %s; want one NOTICE naming the primary %s, and the write run there", what, rs, nodeOfPort[port], primary.Name)
		}
	}
	// readsUntilOn reads until a read runs on node, within bound of since.
	readsUntilOn := func(what, node string, since time.Time, bound time.Duration) time.Duration {
		t.Helper()
		var seen []string
		for i := 0; i < 200 && time.Since(since) < bound; i++ {
			r := read(fmt.Sprintf("%s, read %d", what, i+1))
			seen = append(seen, r.Node)
			if r.Node == node {
				return time.Since(since)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: no read ran on %s within %s (reads ran on %v); last snapshot: %s", what, node, bound, seen, describeSnapshot(o.states.Snapshot()))
		return 0
	}

	// inflight runs, on a connection of its own, a read that is still
	// running on the flapping standby when the standby stops, and the read
	// right after it.
	inflight := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	type inflightRead struct {
		port string
		err  error
		took time.Duration
	}
	runInflight := func(sql string) inflightRead {
		start := time.Now()
		opCtx, cancel := context.WithTimeout(ctx, statementTimeout)
		defer cancel()
		var port string
		err := inflight.QueryRow(opCtx, sql).Scan(&port, new(string))
		return inflightRead{port: port, err: err, took: time.Since(start)}
	}
	// startReadOnFlapping starts reads on inflight until one runs on the
	// flapping standby (pg_stat_activity there says so) and returns where
	// its outcome arrives.
	startReadOnFlapping := func(what string) <-chan inflightRead {
		t.Helper()
		tag := marker("flap-inflight")
		sql := "SELECT current_setting('port'), pg_sleep(1)::text /* " + tag + " */"
		for attempt := 1; attempt <= 4; attempt++ {
			done := make(chan inflightRead, 1)
			go func() { done <- runInflight(sql) }()
			deadline := time.Now().Add(700 * time.Millisecond)
			for time.Now().Before(deadline) {
				var active int64
				err := flapping.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%"+tag+"%' AND pid <> pg_backend_pid()").Scan(&active)
				if err != nil {
					t.Fatalf("%s: ask %s what it runs: %v", what, flapping.Name, err)
				}
				if active == 1 {
					return done
				}
				time.Sleep(20 * time.Millisecond)
			}
			select {
			case r := <-done:
				if r.err != nil {
					t.Fatalf("%s: a long read failed before any stop: %v (NOTICEs %v)", what, r.err, inflight.routes(t))
				}
				inflight.routes(t)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: a long read did not end", what)
			}
		}
		t.Fatalf("%s: four long reads in a row did not run on %s", what, flapping.Name)
		return nil
	}
	var inflightLost []string

	readsUntilOn("before the first flap", flapping.Name, time.Now(), flapUsedAgainWithin)

	for flap := 1; flap <= flapCount; flap++ {
		name := fmt.Sprintf("flap %d", flap)

		inflightDone := startReadOnFlapping(name)
		stopBegan := tl.mark(name + ": stop of " + flapping.Name + " began")
		if err := flapping.Stop(ctx); err != nil {
			t.Fatalf("%s: stop %s: %v", name, flapping.Name, err)
		}
		stopped := tl.mark(name + ": " + flapping.Name + " stopped")
		tl.stopping = append(tl.stopping, [2]time.Time{stopBegan, stopped})

		// The read that was running on the standby: PostgreSQL's fast
		// shutdown ends it with FATAL 57P01. Its RowDescription had reached
		// the client, so pgowl may not send it again (README, "Dead
		// backends"): it either ran again on the other standby, or failed with
		// 08006 "lost the connection" and the session goes on.
		select {
		case r := <-inflightDone:
			rs := inflight.routes(t)
			what := fmt.Sprintf("%s: the read running on %s when it stopped (%s)", name, flapping.Name, r.took.Round(time.Millisecond))
			switch {
			case r.err != nil:
				if !flapLostConnection(r.err, flapping.Name) || inflight.PgConn().IsClosed() {
					t.Errorf("%s failed: %s (NOTICEs %v, connection closed: %t); want it to run again on %s, or 08006 \"pgowl: lost the connection to %s\" with the connection kept",
						what, flapDescribeError(r.err), rs, inflight.PgConn().IsClosed(), steady.Name, flapping.Name)
				} else {
					inflightLost = append(inflightLost, fmt.Sprintf("%s: %s after %s (NOTICEs %v)", name, flapDescribeError(r.err), r.took.Round(time.Millisecond), rs))
				}
			case nodeOfPort[r.port] != steady.Name:
				t.Errorf("%s: answered by %s (NOTICEs %v), want %s", what, nodeOfPort[r.port], rs, steady.Name)
			case len(rs) == 0 || rs[len(rs)-1].Node != steady.Name:
				t.Errorf("%s ran again on %s, but its NOTICEs are %v: the last one must name the node that ran it", what, steady.Name, rs)
			default:
				t.Logf("%s ran again on %s; NOTICEs %v", what, steady.Name, rs)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the read running on %s when it stopped had no outcome 10s later", name, flapping.Name)
		}

		// The same session's next read, at once: the monitor may not have
		// noticed the stop yet, and round robin may pick the stopped standby,
		// which refuses connections. It must run on the other standby.
		seenBefore := describeSnapshot(o.states.Snapshot())
		next := runInflight("SELECT current_setting('port'), 'next'::text")
		rs := inflight.routes(t)
		switch {
		case next.err != nil:
			t.Errorf("%s: the read right after the stop (%s, %s) failed: %s (NOTICEs %v, connection closed: %t); snapshot when it began: %s",
				name, tl.when(time.Now().Add(-next.took)), next.took.Round(time.Millisecond), flapDescribeError(next.err), rs, inflight.PgConn().IsClosed(), seenBefore)
		case nodeOfPort[next.port] != steady.Name || len(rs) != 1 || rs[0].Node != steady.Name:
			t.Errorf("%s: the read right after the stop ran on %s with NOTICEs %v, want one NOTICE naming %s, which ran it", name, nodeOfPort[next.port], rs, steady.Name)
		case next.took > flapReadAfterStopWithin:
			t.Errorf("%s: the read right after the stop took %s, want at most %s; snapshot when it began: %s", name, next.took.Round(time.Millisecond), flapReadAfterStopWithin, seenBefore)
		default:
			t.Logf("%s: the read right after the stop ran on %s in %s; snapshot when it began: %s", name, steady.Name, next.took.Round(time.Millisecond), seenBefore)
		}

		o.waitSnapshot(t, flapSeenDownWithin, name+": "+flapping.Name+" down", func(s *route.Snapshot) bool {
			n := findNode(s, flapping.Name)
			return n != nil && !n.Up
		})
		seenDown := tl.mark(name + ": the monitor saw " + flapping.Name + " down")
		if seenDown.Sub(stopped) > flapSeenDownWithin {
			t.Errorf("%s: the monitor saw %s down %s after it stopped, want within %s", name, flapping.Name, seenDown.Sub(stopped).Round(time.Millisecond), flapSeenDownWithin)
		}
		snap := o.states.Snapshot()
		if p, s := findNode(snap, primary.Name), findNode(snap, steady.Name); p == nil || !p.Up || p.Role != route.RolePrimary ||
			s == nil || !s.Up || s.Role != route.RoleStandby || !s.LagKnown || s.Lag > maxLag {
			t.Errorf("%s: with %s down the monitor's snapshot is %s; want %s an up primary and %s an up standby within the lag limit",
				name, flapping.Name, describeSnapshot(snap), primary.Name, steady.Name)
		}

		for i := 1; i <= 5; i++ {
			if r := read(fmt.Sprintf("%s: read %d with %s down", name, i, flapping.Name)); r.Node != steady.Name {
				t.Errorf("%s: read %d with %s down ran on %s, want the standby left, %s", name, i, flapping.Name, r.Node, steady.Name)
			}
			if i <= 3 {
				write(fmt.Sprintf("%s: write %d with %s down", name, i, flapping.Name))
			}
		}

		startBegan := tl.mark(name + ": start of " + flapping.Name + " began")
		tl.down = append(tl.down, [2]time.Time{stopped, startBegan})
		if err := flapping.Start(ctx); err != nil {
			t.Fatalf("%s: start %s: %v", name, flapping.Name, err)
		}
		started := tl.mark(name + ": " + flapping.Name + " started")
		o.waitSnapshot(t, flapUsedAgainWithin, name+": "+flapping.Name+" up as a standby with a lag within the limit", func(s *route.Snapshot) bool {
			n := findNode(s, flapping.Name)
			return n != nil && n.Up && n.Role == route.RoleStandby && n.LagKnown && n.Lag <= maxLag
		})
		seenUp := tl.mark(name + ": the monitor saw " + flapping.Name + " up")
		if err := flapping.WaitCaughtUp(ctx, primary); err != nil {
			t.Fatalf("%s: %s catching up with %s: %v", name, flapping.Name, primary.Name, err)
		}
		usedAfter := readsUntilOn(name+": after the start", flapping.Name, started, flapUsedAgainWithin)
		tl.mark(name + ": a read ran on " + flapping.Name + " again")
		t.Logf("%s: stop took %s; the monitor saw %s down %s after it stopped; start took %s; the monitor saw it up %s and a read ran on it %s after it started",
			name, stopped.Sub(stopBegan).Round(time.Millisecond), flapping.Name,
			seenDown.Sub(stopped).Round(time.Millisecond), started.Sub(startBegan).Round(time.Millisecond),
			seenUp.Sub(started).Round(time.Millisecond), usedAfter.Round(time.Millisecond))
	}

	// Let the background client run a moment with the standby back, then stop it.
	time.Sleep(300 * time.Millisecond)
	stopChurn()

	var reads, writes, readsInDown, writesInDown int
	byNode := map[string]int{}
	primaryReasons := map[string]int{}
	for i, op := range ops {
		kind := "read"
		if op.write {
			kind = "write"
		}
		what := fmt.Sprintf("background %s %d (began %s, took %s)", kind, i+1, tl.when(op.start), op.end.Sub(op.start).Round(time.Millisecond))
		if op.closed {
			t.Errorf("%s: the client's connection was closed (error %v, NOTICEs %v)", what, op.err, op.routes)
		}
		if op.err != nil {
			if !op.write && !op.closed && flapLostConnection(op.err, flapping.Name) && tl.overlapsStop(op.start, op.end) {
				// Running on the standby when it stopped (see the foreground's long read).
				inflightLost = append(inflightLost, fmt.Sprintf("%s: %s (NOTICEs %v)", what, flapDescribeError(op.err), op.routes))
				continue
			}
			t.Errorf("%s failed: %s (NOTICEs %v); with %s up, every %s should succeed", what, flapDescribeError(op.err), op.routes, steady.Name, kind)
			continue
		}
		if len(op.routes) != 1 {
			t.Errorf("%s: NOTICEs %v, want exactly one", what, op.routes)
			continue
		}
		r := op.routes[0]
		if r.Node != op.ranOn {
			t.Errorf("%s: NOTICE %v, but it ran on %s", what, r, op.ranOn)
		}
		byNode[kind+"@"+op.ranOn]++
		inDown := tl.inDown(op.start, op.end)
		if op.write {
			writes++
			if inDown {
				writesInDown++
			}
			if r.Node != primary.Name || r.Role != "primary" {
				t.Errorf("%s: NOTICE %v, want the primary %s", what, r, primary.Name)
			}
			continue
		}
		reads++
		if inDown {
			readsInDown++
		}
		switch {
		case r.Role == "primary":
			primaryReasons[r.Reason]++
			if r.Reason != "READ_YOUR_WRITES" {
				t.Errorf("%s: ran on the primary with NOTICE %v; with routing.when_no_standby reject a read goes to the primary only for READ_YOUR_WRITES", what, r)
			}
		case r.Node == flapping.Name && inDown:
			t.Errorf("%s: NOTICE %v names %s, which was stopped for the whole read", what, r, flapping.Name)
		case r.Node != flapping.Name && r.Node != steady.Name:
			t.Errorf("%s: NOTICE %v names no standby", what, r)
		}
		if op.want >= 0 && op.count != op.want {
			t.Errorf("%s on %s saw %d of the client's rows, want the %d it had written before (read your writes)", what, op.ranOn, op.count, op.want)
		}
	}
	var keys []string
	for k := range byNode {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var summary []string
	for _, k := range keys {
		summary = append(summary, fmt.Sprintf("%s=%d", k, byNode[k]))
	}
	t.Logf("background client: %d writes (%d while %s was down), %d reads (%d while it was down); by node: %s; reads on the primary by reason: %v",
		writes, writesInDown, flapping.Name, reads, readsInDown, strings.Join(summary, " "), primaryReasons)
	for _, l := range inflightLost {
		t.Logf("a read running on %s when it stopped failed, and its session went on: %s", flapping.Name, l)
	}
	if readsInDown < flapCount || writesInDown < flapCount {
		t.Errorf("the background client ran %d reads and %d writes while %s was down, want at least %d of each: the flaps were not exercised",
			readsInDown, writesInDown, flapping.Name, flapCount)
	}
	if byNode["read@"+flapping.Name] == 0 || byNode["read@"+steady.Name] == 0 {
		t.Errorf("the background client's reads ran on %v; want some on each standby", byNode)
	}
}
