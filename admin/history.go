package admin

import (
	"sync"
	"sync/atomic"
)

// History keeps the last routed units in a fixed ring. It is safe for
// concurrent use; Add never allocates.
type History struct {
	slots []historySlot
	// next is the sequence number of the last unit added (the first is 1).
	next atomic.Uint64
}

type historySlot struct {
	mu   sync.Mutex
	seq  uint64 // 0: never written
	unit Unit
}

// NewHistory returns a ring of size units; size 0 keeps nothing.
func NewHistory(size int) *History {
	return &History{slots: make([]historySlot, max(size, 0))}
}

// Size is the number of units the ring holds when full.
func (h *History) Size() int { return len(h.slots) }

// Add records u, replacing the oldest unit when the ring is full.
func (h *History) Add(u *Unit) {
	if len(h.slots) == 0 {
		return
	}
	seq := h.next.Add(1)
	s := &h.slots[(seq-1)%uint64(len(h.slots))]
	s.mu.Lock()
	if seq > s.seq { // a writer that lapped a slow one keeps the newer unit
		s.seq, s.unit = seq, *u
	}
	s.mu.Unlock()
}

// Filter selects units from the history; an empty field matches every unit.
type Filter struct {
	Node, Reason, Outcome, User string
	// AI, when set, matches only units whose AI flag equals *AI.
	AI *bool
}

// Match reports whether u passes the filter. Reason matches the routing
// reason or the refusal code.
func (f *Filter) Match(u *Unit) bool {
	return (f.Node == "" || f.Node == u.Node) &&
		(f.Reason == "" || f.Reason == u.Reason || f.Reason == u.Refusal) &&
		(f.Outcome == "" || f.Outcome == u.Outcome) &&
		(f.User == "" || f.User == u.User) &&
		(f.AI == nil || *f.AI == u.AI)
}

// Latest returns up to limit units that match f, newest first.
func (h *History) Latest(f Filter, limit int) []Unit {
	n := uint64(len(h.slots))
	if n == 0 || limit <= 0 {
		return nil
	}
	last := h.next.Load()
	var out []Unit
	for seq := last; seq > 0 && last-seq < n && len(out) < limit; seq-- {
		s := &h.slots[(seq-1)%n]
		s.mu.Lock()
		u, ok := s.unit, s.seq == seq
		s.mu.Unlock()
		if ok && f.Match(&u) {
			out = append(out, u)
		}
	}
	return out
}
