package monitor

import (
	"maps"
	"slices"
)

// A monitor learns facts about its nodes that a single sample does not show
// again: the highest timeline a node was seen primary on (which makes an old
// primary that comes back on an older timeline stale, see
// route.Snapshot.NewestPrimaryTimeline), and a standby found diverged from a
// primary (see tracker.divergedFrom). When the node list is edited by a
// reload, pgowl builds a new monitor; Memory and Inherit carry these facts
// over for the nodes the new list keeps (same name, same address), so a
// reload that adds a standby does not readmit a stale primary. The facts of
// a node that was removed, or removed and added back, are not passed on: the
// operator changed what that name stands for, and a node that is no longer
// polled cannot show that it still exists, so it no longer outranks the nodes
// that remain.

// NodeMemory is what a monitor remembers about one node beyond its last sample.
type NodeMemory struct {
	// PrimaryTimeline is the highest timeline the node was seen primary on; 0 when never.
	PrimaryTimeline uint32
	// DivergedFrom names the primary this standby was found diverged from; "" when not diverged.
	DivergedFrom string
	// DivergedTimeline is DivergedFrom's timeline when the standby was marked.
	DivergedTimeline uint32
}

// Memory returns what the monitor remembers, per node name, for the nodes
// with something to remember. It is safe to call while Run runs.
func (m *Monitor) Memory() map[string]NodeMemory {
	m.memoryMu.Lock()
	defer m.memoryMu.Unlock()
	return maps.Clone(m.memory)
}

// Inherit gives the monitor facts an earlier monitor learned about the
// nodes named in memory (see Memory); a name this monitor does not poll is
// ignored, and so is a divergence from a primary it does not poll. The
// caller passes only the nodes it keeps unchanged. Call it before Run.
func (m *Monitor) Inherit(memory map[string]NodeMemory) {
	if m.running.Load() {
		m.log.Error().Msg("Inherit called after Run; ignored")
		return
	}
	index := make(map[string]int, len(m.nodes))
	for i, t := range m.nodes {
		index[t.addr.Name] = i
	}
	for _, name := range slices.Sorted(maps.Keys(memory)) {
		i, ok := index[name]
		if !ok {
			continue
		}
		mem, t := memory[name], m.nodes[i]
		t.primaryTimeline = max(t.primaryTimeline, mem.PrimaryTimeline)
		m.newestPrimaryTimeline = max(m.newestPrimaryTimeline, mem.PrimaryTimeline)
		if from, ok := index[mem.DivergedFrom]; ok && mem.DivergedFrom != "" && from != i {
			t.divergedFrom, t.divergedTimeline = from, mem.DivergedTimeline
		}
	}
	m.rememberFacts()
	initial, _ := m.buildSnapshot(m.Snapshot().TakenAt)
	m.snapshot.Store(initial)
}

// rememberFacts updates what Memory returns from the trackers; it runs on
// the goroutine that owns them (Run, or the caller of New and Inherit).
func (m *Monitor) rememberFacts() {
	facts := make(map[string]NodeMemory)
	for _, t := range m.nodes {
		mem := NodeMemory{PrimaryTimeline: t.primaryTimeline}
		if t.divergedFrom >= 0 {
			mem.DivergedFrom, mem.DivergedTimeline = m.nodes[t.divergedFrom].addr.Name, t.divergedTimeline
		}
		if mem != (NodeMemory{}) {
			facts[t.addr.Name] = mem
		}
	}
	m.memoryMu.Lock()
	defer m.memoryMu.Unlock()
	if !maps.Equal(facts, m.memory) {
		m.memory = facts
	}
}
