package monitor

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// walSample is one reading of the primary's WAL position.
type walSample struct {
	// sentAt is when the query was sent: the position existed no earlier.
	sentAt time.Time
	// doneAt is when the answer arrived: the position existed by then.
	doneAt time.Time
	// lsn is pg_current_wal_insert_lsn() as a byte position: the insert
	// position, because a commit with synchronous_commit off is visible on
	// the primary before the WAL writer has written it.
	lsn uint64
}

// walHistory is a fixed-size ring of a primary's samples, oldest first. The
// samples of one primary have non-decreasing positions and times.
type walHistory struct {
	buf   []walSample
	start int
	n     int
}

func newWALHistory(size int) walHistory { return walHistory{buf: make([]walSample, size)} }

// add appends s, dropping the oldest sample when the ring is full.
func (h *walHistory) add(s walSample) {
	if h.n < len(h.buf) {
		h.buf[(h.start+h.n)%len(h.buf)] = s
		h.n++
		return
	}
	h.buf[h.start] = s
	h.start = (h.start + 1) % len(h.buf)
}

func (h *walHistory) reset() { h.start, h.n = 0, 0 }

func (h *walHistory) len() int { return h.n }

// at returns the i-th sample, counting from the oldest.
func (h *walHistory) at(i int) walSample { return h.buf[(h.start+i)%len(h.buf)] }

// latest returns the newest sample; ok is false when the history is empty.
func (h *walHistory) latest() (s walSample, ok bool) {
	if h.n == 0 {
		return walSample{}, false
	}
	return h.at(h.n - 1), true
}

// lagResult is a standby's lag measured against a primary's history.
type lagResult struct {
	lag      time.Duration
	lagBytes uint64
	known    bool
	// whyUnknown says why known is false.
	whyUnknown string
}

// standbyLag measures a standby whose replay position was replay when its
// query was sent at sentAt, against the primary samples in h that finished
// before sentAt. A caught-up standby has lag 0 when the latest such sample is
// at most freshWithin older than sentAt, and the sample's age otherwise. See
// the package documentation for the bound.
func standbyLag(h *walHistory, replay uint64, sentAt time.Time, freshWithin time.Duration) lagResult {
	usable := h.len()
	for usable > 0 && h.at(usable-1).doneAt.After(sentAt) {
		usable--
	}
	if usable == 0 {
		return lagResult{whyUnknown: "no primary sample precedes the standby's"}
	}
	latest := h.at(usable - 1)
	if replay >= latest.lsn {
		age := sentAt.Sub(latest.sentAt)
		if age <= freshWithin {
			age = 0
		}
		return lagResult{lag: age, known: true}
	}
	// Positions are non-decreasing: find the oldest sample beyond replay.
	lo, hi := 0, usable-1
	for lo < hi {
		mid := (lo + hi) / 2
		if h.at(mid).lsn > replay {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	lag := sentAt.Sub(h.at(lo).sentAt)
	if lag < 0 {
		lag = 0
	}
	return lagResult{lag: lag, lagBytes: latest.lsn - replay, known: true}
}

// parseLSN turns PostgreSQL's pg_lsn text form "16/B374D848" into a byte position.
func parseLSN(text string) (uint64, error) {
	high, low, ok := strings.Cut(text, "/")
	if !ok || high == "" || low == "" || len(high) > 8 || len(low) > 8 {
		return 0, fmt.Errorf("monitor: malformed LSN %q", text)
	}
	h, err := strconv.ParseUint(high, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("monitor: malformed LSN %q: %w", text, err)
	}
	l, err := strconv.ParseUint(low, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("monitor: malformed LSN %q: %w", text, err)
	}
	return h<<32 | l, nil
}
