package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/proxy"
	"github.com/pgowl/pgowl/route"
)

// Bounds of the Patroni switchover test.
const (
	// patroniNamedToWriteLimit is the Done-when bound: writes reach the new leader
	// within this long of Patroni naming it.
	patroniNamedToWriteLimit = time.Second
	patroniLoadWorkers       = 8
	// patroniLoadPause is each worker's pause between writes, so that eight
	// workers leave the two cores to Patroni, etcd and PostgreSQL.
	patroniLoadPause = 10 * time.Millisecond
	// patroniMaxWritesPerWorker bounds each worker's loop besides its context.
	patroniMaxWritesPerWorker = 20000
	// patroniLeaderPoll is how often the test asks every member's REST API who is leader.
	patroniLeaderPoll = 20 * time.Millisecond
)

// TestPatroniSwitchoverAndFailoverUnderLoad runs pgowl in front of three
// Patroni members with topology.patroni.urls, writes through it from eight
// clients, and runs `patronictl switchover` and then `patronictl failover`.
// Each time, the first write that succeeds on the new leader must come
// within one second of the first moment any member's REST API names it
// (the test polls every member every 20ms and takes the end of the last
// poll that did not name it, so the delay it reports is an upper bound), and
// after that moment no write may run on the old leader (the server's own
// inet_server_port() in RETURNING) and pgowl's routing log may hold no unit
// sent to the old leader (each line stamped with its wall time at
// microsecond precision). Every acknowledged write must be on the last
// leader at the end.
func TestPatroniSwitchoverAndFailoverUnderLoad(t *testing.T) {
	pc := startPatroniCluster(t, 3)
	ctx := timeoutCtx(t, 2*time.Minute)
	leader := pc.Members[0]
	if err := leader.Node.Exec(ctx, `CREATE TABLE patroni_load (worker int, n int, written_at timestamptz DEFAULT clock_timestamp(), PRIMARY KEY (worker, n));
		GRANT ALL ON patroni_load TO `+appUser); err != nil {
		t.Fatalf("create the load table: %v", err)
	}
	o := startOwlBehindPatroni(t, pc)

	load := startPatroniLoad(t, o, patroniLoadWorkers)
	load.waitWritesOn(t, pc, leader.Name(), 10, 15*time.Second)

	type step struct {
		command   string
		old, next *patroniMember
	}
	steps := []step{
		{command: "switchover", old: pc.Members[0], next: pc.Members[1]},
		{command: "failover", old: pc.Members[1], next: pc.Members[2]},
	}
	var reports []string
	for _, s := range steps {
		watch := watchPatroniLeader(ctx, pc, s.old.Name(), s.next)
		args := []string{s.command, "--candidate", s.next.Name(), "--force"}
		if s.command == "switchover" {
			args = append(args, "--leader", s.old.Name())
		}
		began := time.Now()
		out := pc.patronictl(t, 60*time.Second, args...)
		t.Logf("patronictl %s (%s):\n%s", strings.Join(args, " "), time.Since(began).Round(time.Millisecond), strings.TrimSpace(out))
		named := watch.waitNamed(t, s.next.Name(), 30*time.Second)
		load.waitWritesOn(t, pc, s.next.Name(), 10, 15*time.Second)
		// Let the old leader rejoin as a replica under load before the next step.
		rejoin, cancel := context.WithTimeout(ctx, 45*time.Second)
		pc.waitMembersStreaming(rejoin, t, s.next.Name())
		cancel()
		watch.stop()
		if snap := o.inst.Nodes().Snapshot(); snap.Topology != route.TopologyPatroni {
			t.Errorf("%s: pgowl no longer follows Patroni: topology %s", s.command, topologyOf(snap))
		}
		reports = append(reports, checkPatroniHandover(t, o, load, s.command, s.old, s.next, named, watch.promoted()))
	}
	acknowledged := load.stop(t)
	for _, r := range reports {
		t.Log(r)
	}
	requireAcknowledgedWritesOn(t, pc.Members[2], acknowledged)
}

// checkPatroniHandover checks one change of leader from old to next, named by
// Patroni at named, and returns a line of figures.
// promoted is when the new leader's PostgreSQL was first seen out of recovery
// (zero if never): the part of the delay that is Patroni's promotion, not pgowl's.
func checkPatroniHandover(t *testing.T, o *patroniOwl, load *patroniLoad, what string, old, next *patroniMember, named, promoted time.Time) string {
	t.Helper()
	writes := load.results()
	var firstOnNext time.Time
	failed, onOldAfter := 0, 0
	for _, w := range writes {
		if w.err == nil && w.port == next.Node.Port && w.end.After(named.Add(-time.Minute)) && (firstOnNext.IsZero() || w.end.Before(firstOnNext)) {
			firstOnNext = w.end
		}
		if w.err == nil && w.port == old.Node.Port && w.start.After(named) {
			onOldAfter++
			t.Errorf("%s: a write sent %s after Patroni named %s ran on the old leader %s", what, w.start.Sub(named), next.Name(), old.Name())
		}
		if w.err != nil && w.start.After(named.Add(-10*time.Second)) && w.start.Before(named.Add(10*time.Second)) {
			failed++
		}
	}
	if firstOnNext.IsZero() {
		t.Fatalf("%s: no write succeeded on %s", what, next.Name())
	}
	delay := firstOnNext.Sub(named)
	breakdown := "its PostgreSQL was never seen out of recovery by the test's own poll"
	if !promoted.IsZero() {
		breakdown = fmt.Sprintf("Patroni's promotion: %s from naming it to its PostgreSQL answering out of recovery; pgowl: %s from then to the first write",
			promoted.Sub(named).Round(time.Millisecond), firstOnNext.Sub(promoted).Round(time.Millisecond))
	}
	if delay > patroniNamedToWriteLimit {
		t.Errorf("%s: the first write on %s succeeded %s after Patroni named it; want at most %s (%s)", what, next.Name(), delay, patroniNamedToWriteLimit, breakdown)
	}
	routedToOld := 0
	for _, line := range o.routedLines(t) {
		if line.node == old.Name() && line.at.After(named) {
			routedToOld++
			if routedToOld <= 5 {
				t.Errorf("%s: pgowl routed a unit to the old leader %s at %s, %s after Patroni named %s (role %s, outcome %s)",
					what, old.Name(), line.at.Format(time.RFC3339Nano), line.at.Sub(named), next.Name(), line.role, line.outcome)
			}
		}
	}
	if routedToOld > 0 {
		t.Errorf("%s: %d units routed to the old leader %s after Patroni named %s", what, routedToOld, old.Name(), next.Name())
	}
	return fmt.Sprintf("%s %s -> %s: first write on the new leader %s after Patroni named it (bound %s; %s); "+
		"writes run on the old leader after that: %d; units routed to it after that: %d; failed writes within 10s of the change: %d",
		what, old.Name(), next.Name(), delay.Round(time.Millisecond), patroniNamedToWriteLimit, breakdown, onOldAfter, routedToOld, failed)
}

// requireAcknowledgedWritesOn fails t when a write a client saw committed is not on m.
func requireAcknowledgedWritesOn(t *testing.T, m *patroniMember, acknowledged map[[2]int]bool) {
	t.Helper()
	ctx := timeoutCtx(t, 30*time.Second)
	conn, err := m.Node.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to %s: %v", m.Name(), err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT worker, n FROM patroni_load")
	if err != nil {
		t.Fatalf("read the load table on %s: %v", m.Name(), err)
	}
	present := map[[2]int]bool{}
	for rows.Next() {
		var w, n int
		if err := rows.Scan(&w, &n); err != nil {
			t.Fatalf("scan: %v", err)
		}
		present[[2]int{w, n}] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the load table on %s: %v", m.Name(), err)
	}
	missing := 0
	for key := range acknowledged {
		if !present[key] {
			missing++
		}
	}
	t.Logf("acknowledged writes: %d, rows on %s: %d, acknowledged but missing: %d", len(acknowledged), m.Name(), len(present), missing)
	if missing > 0 {
		t.Errorf("%d acknowledged writes are not on the leader %s", missing, m.Name())
	}
}

// ---------------------------------------------------------------------------
// pgowl in front of Patroni

// patroniOwl is a pgowl instance whose log lines carry their wall time at microsecond precision.
type patroniOwl struct {
	addr string
	inst *proxy.Instance
	logs *owltest.LogBuffer
}

// startOwlBehindPatroni runs pgowl in front of pc's members with
// topology.patroni.urls naming every member's REST API, and waits until its
// monitor follows Patroni with p1 primary and the others standbys. Each log
// line gets "at_us", its wall time in microseconds (zerolog's own timestamp
// has whole seconds).
func startOwlBehindPatroni(t *testing.T, pc *patroniCluster) *patroniOwl {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	for _, m := range pc.Members {
		cfg.Nodes = append(cfg.Nodes, config.Node{Name: m.Name(), Host: m.Node.Host, Port: m.Node.Port})
		cfg.Topology.Patroni.URLs = append(cfg.Topology.Patroni.URLs, m.APIURL)
	}
	cfg.Users = []config.User{{Name: appUser, Password: appPassword, Auth: config.AuthSCRAM}}
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Monitor.Interval = 100 * time.Millisecond
	cfg.Admin.Listen = "127.0.0.1:0"
	ln, err := proxy.Listen(context.Background(), cfg)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	cfg.Listen = ln.Addr().String()
	if err := cfg.Validate(); err != nil {
		ln.Close()
		t.Fatalf("pgowl configuration is invalid: %v", err)
	}
	logs := &owltest.LogBuffer{}
	stamp := zerolog.HookFunc(func(e *zerolog.Event, _ zerolog.Level, _ string) { e.Int64("at_us", time.Now().UnixMicro()) })
	logger := zerolog.New(logs).Level(zerolog.InfoLevel).Hook(stamp).With().Timestamp().Logger()
	inst, err := proxy.Build(cfg, logger)
	if err != nil {
		ln.Close()
		t.Fatalf("proxy.Build: %v", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Run(runCtx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("pgowl Run returned an error after shutdown: %v", err)
			}
		case <-time.After(owltest.StopTimeout):
			t.Errorf("pgowl Run did not return within %s of cancelling its context", owltest.StopTimeout)
		}
		if t.Failed() {
			t.Logf("pgowl log (tail):\n%s", logs.Tail(24<<10))
		}
	})
	o := &patroniOwl{addr: cfg.Listen, inst: inst, logs: logs}
	deadline := time.Now().Add(proxyReadyTimeout)
	for {
		s := inst.Nodes().Snapshot()
		ready := s != nil && s.Topology == route.TopologyPatroni
		for i, m := range pc.Members {
			n := findNode(s, m.Name())
			want := route.RoleStandby
			if i == 0 {
				want = route.RolePrimary
			}
			if n == nil || !n.Up || n.Role != want {
				ready = false
			}
		}
		if ready {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgowl does not follow Patroni with p1 primary within %s; last snapshot: %s (topology %v)", proxyReadyTimeout, describeSnapshot(s), topologyOf(s))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func topologyOf(s *route.Snapshot) string {
	if s == nil {
		return "none"
	}
	return s.Topology.String() + " " + s.TopologyError
}

// routedLine is one routing-log line.
type routedLine struct {
	at                  time.Time
	node, role, outcome string
}

// routedLines returns the routing-log lines written so far.
func (o *patroniOwl) routedLines(t *testing.T) []routedLine {
	t.Helper()
	var out []routedLine
	for _, e := range o.logs.Entries(t) {
		if e["message"] != "routed" {
			continue
		}
		at, _ := e["at_us"].(float64)
		node, _ := e["node"].(string)
		role, _ := e["role"].(string)
		outcome, _ := e["outcome"].(string)
		out = append(out, routedLine{at: time.UnixMicro(int64(at)), node: node, role: role, outcome: outcome})
	}
	return out
}

// ---------------------------------------------------------------------------
// The write load

// patroniWrite is one write a load worker sent.
type patroniWrite struct {
	worker, n  int
	start, end time.Time
	// port is the server port the INSERT ran on (RETURNING inet_server_port()); 0 when it failed.
	port int
	err  error
}

// patroniLoad is the workers writing through pgowl until stopped.
type patroniLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	writes []patroniWrite
}

// startPatroniLoad starts workers that each insert one row at a time through
// o in autocommit (one unnamed-statement unit each), reconnecting when their
// connection ends. Each loop is bounded by patroniMaxWritesPerWorker and by
// the test's end.
func startPatroniLoad(t *testing.T, o *patroniOwl, workers int) *patroniLoad {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	load := &patroniLoad{cancel: cancel}
	dsn := fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable&connect_timeout=5", appUser, appPassword, o.addr, appDatabase)
	for w := range workers {
		load.wg.Add(1)
		go func() {
			defer load.wg.Done()
			load.work(ctx, dsn, w)
		}()
	}
	t.Cleanup(func() { load.cancel(); load.wg.Wait() })
	return load
}

func (l *patroniLoad) work(ctx context.Context, dsn string, worker int) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for n := 0; n < patroniMaxWritesPerWorker && ctx.Err() == nil; n++ {
		if conn == nil || conn.IsClosed() {
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				l.record(patroniWrite{worker: worker, n: n, start: time.Now(), end: time.Now(), err: err})
				return
			}
			cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
			connectCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			conn, err = pgx.ConnectConfig(connectCtx, cfg)
			cancel()
			if err != nil {
				conn = nil
				l.record(patroniWrite{worker: worker, n: n, start: time.Now(), end: time.Now(), err: fmt.Errorf("connect: %w", err)})
				sleepOrDone(ctx, 100*time.Millisecond)
				continue
			}
		}
		w := patroniWrite{worker: worker, n: n, start: time.Now()}
		statementCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var port int32
		w.err = conn.QueryRow(statementCtx, "INSERT INTO patroni_load (worker, n) VALUES ($1, $2) RETURNING inet_server_port()", worker, n).Scan(&port)
		cancel()
		w.end, w.port = time.Now(), int(port)
		if ctx.Err() != nil && w.err != nil {
			return // the load was stopped mid-statement: not a failure of the handover
		}
		l.record(w)
		sleepOrDone(ctx, patroniLoadPause)
	}
}

func sleepOrDone(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (l *patroniLoad) record(w patroniWrite) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

// results returns a copy of the writes so far.
func (l *patroniLoad) results() []patroniWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

// waitWritesOn waits until count writes have succeeded on member name since the call.
func (l *patroniLoad) waitWritesOn(t *testing.T, pc *patroniCluster, name string, count int, timeout time.Duration) {
	t.Helper()
	var port int
	for _, m := range pc.Members {
		if m.Name() == name {
			port = m.Node.Port
		}
	}
	since := time.Now()
	deadline := since.Add(timeout)
	for {
		got := 0
		var lastErrs []string
		for _, w := range l.results() {
			if w.start.Before(since) {
				continue
			}
			if w.err == nil && w.port == port {
				got++
			}
			if w.err != nil {
				lastErrs = append(lastErrs, w.err.Error())
			}
		}
		if got >= count {
			return
		}
		if time.Now().After(deadline) {
			if len(lastErrs) > 5 {
				lastErrs = lastErrs[len(lastErrs)-5:]
			}
			t.Fatalf("only %d of %d writes succeeded on %s within %s; last errors: %s", got, count, name, timeout, strings.Join(lastErrs, " | "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the load and returns the writes the clients saw committed, keyed by (worker, n).
func (l *patroniLoad) stop(t *testing.T) map[[2]int]bool {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	acknowledged := map[[2]int]bool{}
	errorsByText := map[string]int{}
	for _, w := range l.results() {
		if w.err == nil {
			acknowledged[[2]int{w.worker, w.n}] = true
		} else {
			errorsByText[w.err.Error()]++
		}
	}
	var texts []string
	for text, count := range errorsByText {
		texts = append(texts, fmt.Sprintf("%dx %s", count, text))
	}
	sort.Strings(texts)
	t.Logf("load: %d writes acknowledged, failures: %d kinds\n%s", len(acknowledged), len(texts), strings.Join(texts, "\n"))
	return acknowledged
}

// ---------------------------------------------------------------------------
// Watching Patroni name a leader

// patroniLeaderWatch polls every member's GET /cluster until stopped and
// remembers when each leader was first named.
type patroniLeaderWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	// namedAt maps a leader to the end of the last poll round before the one in which
	// some member first named it: the earliest moment it can have been named.
	namedAt map[string]time.Time
	// promotedAt is when the candidate's PostgreSQL first answered out of recovery; zero until then.
	promotedAt time.Time
}

// watchPatroniLeader starts polling; current is the leader named now, and
// candidate's PostgreSQL is polled for the moment it leaves recovery.
func watchPatroniLeader(ctx context.Context, pc *patroniCluster, current string, candidate *patroniMember) *patroniLeaderWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &patroniLeaderWatch{cancel: cancel, done: make(chan struct{}), namedAt: map[string]time.Time{current: {}}}
	client := &http.Client{Timeout: 500 * time.Millisecond}
	promotionDone := make(chan struct{})
	go func() {
		defer close(promotionDone)
		w.watchPromotion(ctx, candidate)
	}()
	go func() {
		defer close(w.done)
		defer func() { <-promotionDone }()
		previousRoundEnd := time.Now()
		for ctx.Err() == nil {
			leaders := make([]string, len(pc.Members))
			var wg sync.WaitGroup
			for i, m := range pc.Members {
				wg.Add(1)
				go func() {
					defer wg.Done()
					status, body, err := httpGet(ctx, client, m.APIURL+"/cluster")
					if err != nil || status != http.StatusOK {
						return
					}
					var v patroniView
					if jsonErr := json.Unmarshal(body, &v); jsonErr == nil {
						leaders[i] = v.leader()
					}
				}()
			}
			wg.Wait()
			w.mu.Lock()
			for _, leader := range leaders {
				if _, seen := w.namedAt[leader]; leader != "" && !seen {
					w.namedAt[leader] = previousRoundEnd
				}
			}
			w.mu.Unlock()
			previousRoundEnd = time.Now()
			sleepOrDone(ctx, patroniLeaderPoll)
		}
	}()
	return w
}

// watchPromotion polls candidate's pg_is_in_recovery() on one connection
// until it answers false or ctx ends.
func (w *patroniLeaderWatch) watchPromotion(ctx context.Context, candidate *patroniMember) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		if conn == nil {
			c, err := candidate.Node.Connect(ctx)
			if err != nil {
				sleepOrDone(ctx, patroniLeaderPoll)
				continue
			}
			conn = c
		}
		queryCtx, cancel := context.WithTimeout(ctx, time.Second)
		var inRecovery bool
		err := conn.QueryRow(queryCtx, "SELECT pg_is_in_recovery()").Scan(&inRecovery)
		cancel()
		switch {
		case err != nil:
			conn.Close(context.Background())
			conn = nil
		case !inRecovery:
			w.mu.Lock()
			w.promotedAt = time.Now()
			w.mu.Unlock()
			return
		}
		sleepOrDone(ctx, patroniLeaderPoll)
	}
}

// promoted returns when the candidate was first seen out of recovery, or zero.
func (w *patroniLeaderWatch) promoted() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.promotedAt
}

// waitNamed returns when leader was first named, failing t after timeout.
func (w *patroniLeaderWatch) waitNamed(t *testing.T, leader string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		at, ok := w.namedAt[leader]
		w.mu.Unlock()
		if ok {
			return at
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Patroni member named %s leader within %s", leader, timeout)
		}
		time.Sleep(patroniLeaderPoll)
	}
}

func (w *patroniLeaderWatch) stop() {
	w.cancel()
	<-w.done
}
