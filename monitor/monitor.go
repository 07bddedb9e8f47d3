package monitor

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/route"
)

// Monitor polls the configured nodes and publishes snapshots of their state.
type Monitor struct {
	opts    Options
	log     zerolog.Logger
	nodes   []*tracker // owned by the goroutine running Run
	running atomic.Bool

	snapshot atomic.Pointer[route.Snapshot]
	// published is closed and replaced each time a snapshot is published.
	published atomic.Pointer[chan struct{}]
	ready     chan struct{}
	readyOnce sync.Once
	// splitBrain is the last logged set of nodes claiming to be primary ("" when one or none).
	splitBrain string
	// newestPrimaryTimeline is the highest timeline a node was seen primary
	// on (route.Snapshot.NewestPrimaryTimeline). Owned by the goroutine running Run.
	newestPrimaryTimeline uint32
	// memory is the facts Memory returns (see memory.go), rebuilt by the
	// goroutine owning the trackers and read by others under memoryMu.
	memoryMu sync.Mutex
	memory   map[string]NodeMemory
	// polls is each node's last poll, for a reload's next monitor (handover.go); under memoryMu.
	polls map[string]handedOver
	// patroniHandover is Patroni's last answer and when it came, for a reload's next monitor
	// (handover.go); under memoryMu.
	patroniHandover handedOverPatroni
	// observer, when set before Run, sees the coordinator's state around
	// every applied poll result and after every publish, from the goroutine
	// running Run: tests check invariants of the real loop with it. Nil in
	// pgowl.
	observer coordinatorObserver
	// patroni is the last answer of Patroni's /cluster and when it came
	// (zero: none yet); patroniErr why the last read failed ("" when it
	// answered). patroniLogged is the topology state last logged. Owned by
	// the goroutine running Run.
	patroni       patroniCluster
	patroniAt     time.Time
	patroniErr    string
	patroniLogged string
}

// coordinatorObserver watches the coordinator step by step (see Monitor.observer).
type coordinatorObserver interface {
	// beforeApply and afterApply run around the application of r.
	beforeApply(m *Monitor, r pollResult)
	afterApply(m *Monitor, r pollResult)
	// published runs after a snapshot is published.
	published(m *Monitor)
}

// tracker is the coordinator's record of one node.
type tracker struct {
	addr     NodeAddr
	hostPort string
	poller   *poller
	// setupError is set when the node's connection settings are unusable.
	setupError string

	inFlight       bool
	triggeredRound uint64
	// awaited: the poll in flight counts for the round that started it (see trigger).
	awaited bool
	// inherited: the tracker's state came from the monitor a reload replaced
	// (InheritSamples) and none of this monitor's polls has answered yet; the
	// first round does not wait for its polls.
	inherited bool

	hasSample      bool
	sample         nodeSample
	sentAt, doneAt time.Time
	lastPollFailed bool
	lastError      string
	// history holds this node's samples while it is a primary.
	history walHistory
	// divergedFrom is the index of a primary that, in a sample taken after
	// this standby answered, was behind the standby's replay position; -1 if
	// none. A standby that follows a primary cannot have replayed more than
	// the primary has inserted at any later moment, so this one has WAL the
	// primary never wrote (it replayed the old primary's WAL past the point
	// where a promoted standby's timeline forked off): comparing positions
	// says nothing, and it will not follow that primary. Such a standby
	// cannot recover by itself: it may go on replaying (an old primary still
	// up, WAL it had received), and the new primary's writes pass its
	// position. The mark stays until the standby reports the timeline the
	// primary was on when it was marked (divergedTimeline), or a newer one:
	// it was rewound or cloned from a primary on that timeline. A standby's
	// timeline is its last restartpoint's, so one that merely checkpointed
	// past an older timeline switch (still on the abandoned branch) is not
	// cleared.
	divergedFrom     int
	divergedTimeline uint32
	// promoted is set when this node was seen in recovery and then as a
	// primary: while its history is short, a standby ahead of it may hold
	// the old primary's WAL past the fork (see confirmSamples).
	promoted bool
	// primaryTimeline is the highest timeline this node was seen primary on
	// (0: never); the monitor's newestPrimaryTimeline is at least each
	// tracker's, and a reload passes it on for the nodes it keeps (memory.go).
	primaryTimeline uint32

	// logged is the state last reported in the log.
	logged loggedState
}

type loggedState struct {
	// reported is false until the node's first state has been logged.
	reported bool
	up       bool
	role     route.Role
	timeline uint32
	lagKnown bool
}

// New returns a Monitor for opts; call Run to start polling. Until the first
// round completes, Snapshot lists every node as down with an unknown role.
func New(opts Options) *Monitor {
	opts = opts.withDefaults()
	m := &Monitor{
		opts:  opts,
		log:   opts.Logger.With().Str("component", "monitor").Logger(),
		ready: make(chan struct{}),
	}
	for i, n := range opts.Nodes {
		t := &tracker{
			addr:         n,
			hostPort:     net.JoinHostPort(n.Host, strconv.Itoa(n.Port)),
			history:      newWALHistory(opts.HistorySize),
			divergedFrom: -1,
		}
		p, err := newPoller(i, n, opts)
		if err != nil {
			t.setupError = err.Error()
			t.lastError = t.setupError
			m.log.Error().Str("node", n.Name).Err(err).Msg("node cannot be polled")
		}
		t.poller = p
		m.nodes = append(m.nodes, t)
	}
	initial := make(chan struct{})
	m.published.Store(&initial)
	initialSnapshot, _ := m.buildSnapshot(time.Now())
	m.snapshot.Store(initialSnapshot)
	return m
}

// Snapshot returns the latest published snapshot without blocking. It is
// never nil. Callers share it and must not modify it.
func (m *Monitor) Snapshot() *route.Snapshot { return m.snapshot.Load() }

// WaitFor blocks until cond holds for a published snapshot, checking the
// current one first and then each new one; it returns false if ctx is done first.
func (m *Monitor) WaitFor(ctx context.Context, cond func(*route.Snapshot) bool) bool {
	for {
		next := *m.published.Load()
		if cond(m.snapshot.Load()) {
			return true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return false
		}
	}
}

// Ready blocks until the first polling round has completed, or returns
// ctx's error.
func (m *Monitor) Ready(ctx context.Context) error {
	select {
	case <-m.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run polls the nodes until ctx is done and their connections are closed.
// It must be called once.
func (m *Monitor) Run(ctx context.Context) {
	if !m.running.CompareAndSwap(false, true) {
		m.log.Error().Msg("Run called twice; the second call returns at once")
		return
	}
	results := make(chan pollResult, len(m.nodes))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, t := range m.nodes {
		if t.poller == nil {
			continue
		}
		wg.Go(func() { t.poller.run(ctx, results) })
	}

	var patroniResults chan patroniResult // nil without Patroni: never ready
	if len(m.opts.PatroniURLs) > 0 {
		patroniResults = make(chan patroniResult, 1)
		wg.Go(func() { m.runPatroni(ctx, patroniResults) })
	}

	ticker := time.NewTicker(m.opts.Interval)
	defer ticker.Stop()
	for round := uint64(1); ; round++ {
		m.runRound(ctx, round, results)
		if ctx.Err() != nil {
			return
		}
		m.publish(time.Now())
		m.readyOnce.Do(func() { close(m.ready) })
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				waiting = false
			case r := <-results:
				m.apply(r, round)
				m.publish(time.Now())
			case p := <-patroniResults:
				m.applyPatroniResult(p)
				m.publish(time.Now())
			}
		}
	}
}

// runRound polls the nodes not known to be standbys, then the standbys, and
// returns when every poll it started has answered or its deadline passes. A
// node found to be a standby in the first phase is polled again in the
// second, so that its sample follows the primary's. The first round waits
// for every poll, so that Ready means "each node has been tried once".
func (m *Monitor) runRound(ctx context.Context, round uint64, results <-chan pollResult) {
	start := time.Now()
	firstPhase, roundEnd := start.Add(m.opts.Interval/2), start.Add(m.opts.Interval)
	if round == 1 {
		longest := m.opts.DialTimeout + m.opts.QueryTimeout + m.opts.Interval
		firstPhase, roundEnd = start.Add(longest), start.Add(2*longest)
	}
	pending := m.trigger(round, func(t *tracker) bool { return t.role() != route.RoleStandby })
	pending = m.collect(ctx, round, results, pending, firstPhase)
	pending += m.trigger(round, func(t *tracker) bool { return t.role() == route.RoleStandby })
	m.collect(ctx, round, results, pending, roundEnd)
}

// trigger starts a poll of every idle node that want selects and returns how many it started.
func (m *Monitor) trigger(round uint64, want func(*tracker) bool) int {
	started := 0
	for _, t := range m.nodes {
		if t.poller == nil || t.inFlight || !want(t) {
			continue
		}
		t.inFlight = true
		t.triggeredRound = round
		t.awaited = round > 1 || !t.inherited
		t.poller.trigger <- struct{}{}
		if t.awaited {
			started++
		}
	}
	return started
}

// collect applies results until pending polls of this round have answered
// or the deadline passes, and returns how many are still pending.
func (m *Monitor) collect(ctx context.Context, round uint64, results <-chan pollResult, pending int, deadline time.Time) int {
	if pending == 0 {
		return 0
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for pending > 0 {
		select {
		case <-ctx.Done():
			return pending
		case <-timer.C:
			return pending
		case r := <-results:
			if m.apply(r, round) {
				pending--
			}
		}
	}
	return 0
}

// apply records a poll result and reports whether the poll was started in round.
func (m *Monitor) apply(r pollResult, round uint64) bool {
	if m.observer != nil {
		m.observer.beforeApply(m, r)
		defer m.observer.afterApply(m, r)
	}
	defer m.rememberFacts()
	t := m.nodes[r.index]
	defer m.rememberPoll(t)
	t.inFlight = false
	t.inherited = false
	counts := t.triggeredRound == round && t.awaited
	if r.err != nil {
		t.lastPollFailed = true
		t.lastError = r.err.Error()
		return counts
	}
	wasPrimary := t.hasSample && !t.sample.inRecovery
	if t.hasSample && t.sample.inRecovery && !r.sample.inRecovery {
		t.promoted = true
	}
	t.hasSample = true
	t.lastPollFailed = false
	t.lastError = ""
	t.sample = r.sample
	t.sentAt, t.doneAt = r.sentAt, r.doneAt
	if t.divergedFrom >= 0 && (!r.sample.inRecovery || r.sample.timeline >= t.divergedTimeline) {
		t.divergedFrom = -1 // promoted, or on the primary's timeline now: measure it again
	}
	if r.sample.inRecovery || !r.sample.lsnValid {
		t.history.reset()
		return counts
	}
	t.primaryTimeline = max(t.primaryTimeline, r.sample.timeline)
	m.newestPrimaryTimeline = max(m.newestPrimaryTimeline, r.sample.timeline)
	m.markDiverged(r)
	if last, ok := t.history.latest(); !wasPrimary || (ok && r.sample.lsn < last.lsn) {
		// A new primary, or one whose WAL went backwards: older samples do not apply.
		t.history.reset()
	}
	t.history.add(walSample{sentAt: r.sentAt, doneAt: r.doneAt, lsn: r.sample.lsn})
	return counts
}

func (t *tracker) role() route.Role {
	switch {
	case !t.hasSample:
		return route.RoleUnknown
	case t.sample.inRecovery:
		return route.RoleStandby
	default:
		return route.RolePrimary
	}
}

// buildSnapshot assembles the nodes' state as of now, measuring each
// standby's lag against the primary route.Primary picks. For each standby
// whose lag is unknown, whyUnknown says why.
func (m *Monitor) buildSnapshot(now time.Time) (snap *route.Snapshot, whyUnknown []string) {
	snap = &route.Snapshot{TakenAt: now, Nodes: make([]route.NodeState, len(m.nodes)), NewestPrimaryTimeline: m.newestPrimaryTimeline}
	whyUnknown = make([]string, len(m.nodes))
	for i, t := range m.nodes {
		state := route.NodeState{
			Name:      t.addr.Name,
			Addr:      t.hostPort,
			Role:      t.role(),
			LastError: t.lastError,
		}
		if t.hasSample {
			state.Up = now.Sub(t.doneAt) <= m.opts.DownAfter
			state.Timeline = t.sample.timeline
			state.SampledAt = t.sentAt
			state.Load = t.sample.load
			if t.sample.lsnValid {
				state.WALPosition = route.LSN(t.sample.lsn)
			}
			state.FlushPosition = route.LSN(t.sample.flush)
		}
		if state.Role == route.RolePrimary {
			state.LagKnown = true
		}
		if m.opts.Connections != nil {
			state.InUse, state.Idle = m.opts.Connections(t.addr.Name)
		}
		snap.Nodes[i] = state
	}
	m.applyPatroni(snap, now)
	primary, err := route.Primary(snap, route.Policy{DownAfter: m.opts.DownAfter}, now)
	history := (*walHistory)(nil)
	switch {
	case err == nil:
		history = &m.nodes[primary].history
	default:
		if last := lastPrimary(m.nodes, snap); last >= 0 {
			// The primary stopped answering (or answers too slowly to
			// count): its last samples still bound the standbys' staleness.
			// A standby that had replayed the WAL of the primary's last
			// sample lacks at most what was written since that sample was
			// taken, so its lag is that sample's age, which grows until the
			// lag limit refuses the standby. Writes made after that sample,
			// on this primary or on one promoted since, are no older than it.
			history = &m.nodes[last].history
		}
	}
	for i, t := range m.nodes {
		state := &snap.Nodes[i]
		if state.Role != route.RoleStandby {
			continue
		}
		var result lagResult
		switch {
		case history != nil && t.divergedFrom >= 0 && history == &m.nodes[t.divergedFrom].history:
			result.whyUnknown = "standby has replayed WAL the primary does not have (it diverged from the primary's timeline)"
		case history == nil:
			result.whyUnknown = "no primary"
		case !state.Up:
			result.whyUnknown = "standby is down"
		case t.lastPollFailed:
			result.whyUnknown = "standby's last poll failed"
		case !t.sample.lsnValid:
			result.whyUnknown = "standby's replay position is unknown"
		case err == nil && m.nodes[primary].promoted && history.len() < confirmSamples && aheadOf(history, t.sample.lsn):
			// A primary just promoted: a standby ahead of it may have
			// replayed the old primary's WAL past the fork, which the next
			// sample proves or disproves (see divergedFrom). (A primary
			// that was one when pgowl started is not new: a standby ahead of
			// its last sample, such as one that replayed its shutdown
			// checkpoint, is measured as usual.)
			result.whyUnknown = "the primary is new and the standby is ahead of its last sample: waiting for a sample that shows the standby follows it"
		default:
			result = standbyLag(history, t.sample.lsn, t.sentAt, m.opts.Interval)
		}
		state.LagKnown, state.Lag, state.LagBytes = result.known, result.lag, result.lagBytes
		state.LagUnknownReason = result.whyUnknown
		whyUnknown[i] = result.whyUnknown
	}
	return snap, whyUnknown
}

// confirmSamples is how many samples a just-promoted primary's history must hold before a
// standby ahead of its latest sample counts as caught up.
const confirmSamples = 3

// aheadOf reports whether a replay position is beyond the latest sample of h.
func aheadOf(h *walHistory, replay uint64) bool {
	latest, ok := h.latest()
	return ok && replay > latest.lsn
}

// markDiverged marks the standbys whose last replay position is beyond the
// primary sample r, taken after they answered (see tracker.divergedFrom).
func (m *Monitor) markDiverged(r pollResult) {
	for _, s := range m.nodes {
		if !s.hasSample || !s.sample.inRecovery || !s.sample.lsnValid || s.lastPollFailed {
			continue
		}
		if r.sentAt.After(s.doneAt) && r.sample.lsn < s.sample.lsn && s.divergedFrom != r.index &&
			s.sample.timeline < r.sample.timeline {
			s.divergedFrom, s.divergedTimeline = r.index, r.sample.timeline
			m.log.Warn().Str("node", s.addr.Name).Str("primary", m.nodes[r.index].addr.Name).
				Uint64("replayed", s.sample.lsn).Uint64("primary_inserted", r.sample.lsn).
				Msg("standby has replayed WAL the primary does not have: it diverged from the primary's timeline and serves no reads until it is on a newer timeline (rewound or cloned)")
		}
	}
}

// lastPrimary returns the index of the node whose samples can still bound the
// standbys' lag when route.Primary finds no available primary: the one node
// whose last sample said primary, if it has samples and no node reports a
// newer timeline. It returns -1 with two or more nodes claiming primary (a
// split brain: which history applies is not known) and when another node is
// on a newer timeline (a standby following a promoted node: its positions are
// on a timeline that forked from this primary's, so comparing them with this
// primary's samples says nothing about what it lacks).
func lastPrimary(nodes []*tracker, snap *route.Snapshot) int {
	found := -1
	for i := range snap.Nodes {
		if snap.Nodes[i].Role != route.RolePrimary {
			continue
		}
		if found >= 0 {
			return -1
		}
		found = i
	}
	if found < 0 || nodes[found].history.len() == 0 || snap.Nodes[found].Timeline < snap.NewestPrimaryTimeline {
		return -1 // none, no history, or a stale primary (its standbys follow an abandoned branch)
	}
	for i := range snap.Nodes {
		if snap.Nodes[i].Timeline > snap.Nodes[found].Timeline {
			return -1
		}
	}
	return found
}

// publish builds and publishes a snapshot, logs state changes and wakes WaitFor callers.
func (m *Monitor) publish(now time.Time) {
	snap, whyUnknown := m.buildSnapshot(now)
	for i, t := range m.nodes {
		m.logStateChange(t, &snap.Nodes[i])
		if snap.Nodes[i].Role == route.RoleStandby {
			m.logLagChange(t, &snap.Nodes[i], whyUnknown[i])
		}
	}
	m.logSplitBrain(snap, now)
	m.logTopology(snap)
	m.snapshot.Store(snap)
	next := make(chan struct{})
	close(*m.published.Swap(&next))
	if m.observer != nil {
		m.observer.published(m)
	}
}

// logSplitBrain logs, once per change, when more than one up node says it is
// not in recovery: which one writes go to (the higher timeline), and which
// are stale primaries that get no statement.
func (m *Monitor) logSplitBrain(snap *route.Snapshot, now time.Time) {
	var claims []string
	for _, n := range snap.Nodes {
		if n.Up && n.Role == route.RolePrimary {
			claims = append(claims, n.Name+"@"+strconv.FormatUint(uint64(n.Timeline), 10))
		}
	}
	state := ""
	if len(claims) > 1 {
		state = strings.Join(claims, ",")
	}
	if state == m.splitBrain {
		return
	}
	m.splitBrain = state
	if state == "" {
		m.log.Info().Msg("split brain over: at most one node reports it is a primary")
		return
	}
	winner, err := route.Primary(snap, route.Policy{DownAfter: m.opts.DownAfter}, now)
	ev := m.log.Error().Strs("claiming_primary", claims)
	if err != nil {
		ev.Msg("SPLIT BRAIN: several nodes report they are primaries on the same timeline; pgowl refuses writes (NO_PRIMARY) rather than guess")
		return
	}
	var stale []string
	for i, n := range snap.Nodes {
		if i != winner && n.Up && n.Role == route.RolePrimary {
			stale = append(stale, n.Name)
		}
	}
	ev.Str("writes_to", snap.Nodes[winner].Name).Strs("stale_primaries", stale).
		Msg("SPLIT BRAIN: several nodes report they are primaries; writes go only to the one on the higher timeline, the stale primaries get no statement")
}

func (m *Monitor) nodeLog(t *tracker, event *zerolog.Event) *zerolog.Event {
	return event.Str("node", t.addr.Name).Str("addr", t.hostPort)
}

// logStateChange logs up/down, role and timeline changes since the last log line.
func (m *Monitor) logStateChange(t *tracker, state *route.NodeState) {
	if state.Up != t.logged.up || !t.logged.reported {
		t.logged.reported = true
		if state.Up {
			m.nodeLog(t, m.log.Info()).Str("role", state.Role.String()).
				Uint32("timeline", state.Timeline).Msg("node is up")
		} else {
			m.nodeLog(t, m.log.Warn()).Str("last_error", state.LastError).
				Dur("down_after", m.opts.DownAfter).Msg("node is down")
		}
		t.logged.up = state.Up
	}
	if state.Role != t.logged.role && state.Role != route.RoleUnknown {
		if t.logged.role != route.RoleUnknown {
			m.nodeLog(t, m.log.Warn()).Str("from", t.logged.role.String()).
				Str("to", state.Role.String()).Msg("node role changed")
		}
		t.logged.role = state.Role
	}
	if state.Timeline != t.logged.timeline && state.Timeline != 0 {
		if t.logged.timeline != 0 {
			m.nodeLog(t, m.log.Info()).Uint32("from", t.logged.timeline).
				Uint32("to", state.Timeline).Msg("node timeline changed")
		}
		t.logged.timeline = state.Timeline
	}
}

// logLagChange logs a standby's lag becoming known or unknown.
func (m *Monitor) logLagChange(t *tracker, state *route.NodeState, whyUnknown string) {
	if state.LagKnown == t.logged.lagKnown {
		return
	}
	t.logged.lagKnown = state.LagKnown
	if state.LagKnown {
		m.nodeLog(t, m.log.Info()).Dur("lag", state.Lag).Uint64("lag_bytes", state.LagBytes).
			Msg("standby lag is known")
		return
	}
	m.nodeLog(t, m.log.Warn()).Str("reason", whyUnknown).Msg("standby lag is unknown")
}
