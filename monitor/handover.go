package monitor

import (
	"slices"
	"time"
)

// A reload that edits the node list builds a new monitor, whose first round
// dials every node anew: under load a dial takes a few hundred milliseconds,
// and the reload waits for the slowest before the new node list is in force.
// The old monitor hands over what it last read of the nodes the new list
// keeps unchanged (InheritSamples): each one's last poll, and a primary's
// recent WAL samples, with the times they were taken. The new monitor starts
// from them, as if its own polls had read them, and its first round waits
// only for the nodes it did not inherit: those the reload added or changed.
// It polls the inherited ones at once all the same; until their first own
// answer, their state ages as the old monitor's would have (a node is down
// past down_after since its last answer), and a standby's lag is measured
// against the inherited samples of the primary.

// handedOver is one node's last poll as the old monitor holds it.
type handedOver struct {
	hasSample      bool
	sample         nodeSample
	sentAt, doneAt time.Time
	lastPollFailed bool
	lastError      string
	promoted       bool
	// history is the node's WAL samples while primary, oldest first.
	history []walSample
}

// handedOverPatroni is Patroni's last answer as the old monitor holds it (zero at: none).
type handedOverPatroni struct {
	cluster patroniCluster
	at      time.Time
}

// rememberPoll records t's state for a later InheritSamples; it runs on the
// goroutine that owns the trackers, after each applied poll. A primary's
// history is copied into the slice the node's previous record used, so that
// a poll allocates nothing once the history is full.
func (m *Monitor) rememberPoll(t *tracker) {
	m.memoryMu.Lock()
	defer m.memoryMu.Unlock()
	if m.polls == nil {
		m.polls = make(map[string]handedOver, len(m.nodes))
	}
	history := m.polls[t.addr.Name].history[:0]
	for i := range t.history.len() {
		history = append(history, t.history.at(i))
	}
	m.polls[t.addr.Name] = handedOver{hasSample: t.hasSample, sample: t.sample, sentAt: t.sentAt, doneAt: t.doneAt,
		lastPollFailed: t.lastPollFailed, lastError: t.lastError, promoted: t.promoted, history: history}
}

// InheritSamples takes over old's last poll of each node named in names
// that this monitor polls too (the caller names those whose address the
// reload kept). Call it before Run, after Inherit; it is safe while old runs.
func (m *Monitor) InheritSamples(old *Monitor, names []string) {
	if m.running.Load() {
		m.log.Error().Msg("InheritSamples called after Run; ignored")
		return
	}
	old.memoryMu.Lock()
	polls := make(map[string]handedOver, len(names))
	for _, name := range names {
		if h, ok := old.polls[name]; ok {
			h.history = slices.Clone(h.history) // old's next poll reuses the slice
			polls[name] = h
		}
	}
	patroni := old.patroniHandover
	old.memoryMu.Unlock()
	if !patroni.at.IsZero() && slices.Equal(m.opts.PatroniURLs, old.opts.PatroniURLs) {
		// Patroni's last answer holds for the new node list as it held for the old (it ages out
		// past down_after as it would have), until the new monitor's own read: without it the
		// first snapshots would say Patroni cannot be reached and exclude no node.
		m.patroni, m.patroniAt = patroni.cluster, patroni.at
		m.memoryMu.Lock()
		m.patroniHandover = patroni
		m.memoryMu.Unlock()
	}
	for _, t := range m.nodes {
		h, ok := polls[t.addr.Name]
		if !ok || t.poller == nil || (!h.hasSample && !h.lastPollFailed) {
			continue
		}
		t.inherited = true
		t.hasSample, t.sample, t.sentAt, t.doneAt = h.hasSample, h.sample, h.sentAt, h.doneAt
		t.lastPollFailed, t.lastError, t.promoted = h.lastPollFailed, h.lastError, h.promoted
		t.history.reset()
		keep := h.history
		if len(keep) > len(t.history.buf) {
			keep = keep[len(keep)-len(t.history.buf):]
		}
		for _, s := range keep {
			t.history.add(s)
		}
		if t.hasSample && !t.sample.inRecovery {
			t.primaryTimeline = max(t.primaryTimeline, t.sample.timeline)
			m.newestPrimaryTimeline = max(m.newestPrimaryTimeline, t.sample.timeline)
		}
		m.rememberPoll(t)
	}
	m.rememberFacts()
	initial, _ := m.buildSnapshot(time.Now())
	m.snapshot.Store(initial)
}
