package route

import (
	"fmt"
	"strconv"
	"strings"
)

// LSN is a WAL position as a byte offset, PostgreSQL's pg_lsn; 0 means none.
type LSN uint64

// UnreadLSN stands for the position of a write that could not be read: later than any
// position, so that no standby is taken to have it (wait_lsn=FFFFFFFF/FFFFFFFF).
const UnreadLSN = LSN(1<<64 - 1)

// String renders the position in PostgreSQL's text form, "16/B374D848".
func (l LSN) String() string { return string(l.Append(nil)) }

// Append appends String's text to dst.
func (l LSN) Append(dst []byte) []byte {
	dst = appendUpperHex(dst, uint32(uint64(l)>>32))
	dst = append(dst, '/')
	return appendUpperHex(dst, uint32(l))
}

// appendUpperHex appends v in upper-case hexadecimal, as PostgreSQL prints
// a pg_lsn.
func appendUpperHex(dst []byte, v uint32) []byte {
	const digits = "0123456789ABCDEF"
	var buf [8]byte
	i := len(buf)
	for {
		i--
		buf[i] = digits[v&0xF]
		v >>= 4
		if v == 0 {
			break
		}
	}
	return append(dst, buf[i:]...)
}

// MarshalText encodes the position in its text form.
func (l LSN) MarshalText() ([]byte, error) { return l.Append(nil), nil }

// UnmarshalText decodes a position from its text form.
func (l *LSN) UnmarshalText(text []byte) error {
	v, err := ParseLSN(string(text))
	*l = v
	return err
}

// ParseLSN reads a position in PostgreSQL's text form ("0/3000148"), upper
// or lower case hexadecimal on both sides of the slash.
func ParseLSN(text string) (LSN, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(text), "/")
	if !ok || hi == "" || lo == "" || len(hi) > 8 || len(lo) > 8 {
		return 0, fmt.Errorf("route: malformed WAL position %q, want the form 0/3000148", text)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("route: malformed WAL position %q, want the form 0/3000148", text)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("route: malformed WAL position %q, want the form 0/3000148", text)
	}
	return LSN(h<<32 | l), nil
}

// WritePosition is a WAL position a session's reads must see: the insert
// position on the primary after the session's last write (or a user's, or a
// token's), with the timeline the primary was on then.
type WritePosition struct {
	// LSN is the position; 0 means the session has nothing to wait for.
	LSN LSN
	// Timeline is the primary's timeline when the position was read; 0 when
	// not known (a token from SET pgowl.read_after).
	Timeline uint32
}

// Raise returns the later of p and q: a position only moves forward. A
// position on a newer timeline replaces one on an older timeline.
func (p WritePosition) Raise(q WritePosition) WritePosition {
	switch {
	case q.LSN == 0:
		return p
	case p.LSN == 0:
		return q
	case q.Timeline != 0 && p.Timeline != 0 && q.Timeline != p.Timeline:
		if q.Timeline > p.Timeline {
			return q
		}
		return p
	case q.LSN > p.LSN:
		if q.Timeline == 0 {
			q.Timeline = p.Timeline
		}
		return q
	}
	return p
}

// NodeReplay is a standby's replay position the proxy learned by asking the
// standby itself (pg_last_wal_replay_lsn()), fresher than the monitor's sample.
type NodeReplay struct {
	// Node is the standby's name.
	Node string
	// LSN is the position it had replayed when asked.
	LSN LSN
}

// target is the position reads under s must see, given the snapshot: after a
// promotion, a position written on an older timeline is capped at the new
// primary's latest sampled position. WAL up to the fork point is on the new
// timeline at the same positions, so a position below it is unchanged; a
// position past the fork point was lost with the old timeline (no node
// will ever have it), and waiting for it would wait for nothing.
func readTarget(p WritePosition, snap *Snapshot) LSN {
	if p.Timeline == 0 {
		return p.LSN
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if n.Role == RolePrimary && n.Up && n.Timeline > p.Timeline && n.WALPosition != 0 && !stalePrimary(snap, n) {
			return min(p.LSN, n.WALPosition)
		}
	}
	return p.LSN
}

// replayedAt is what node i is known to have replayed: the larger of the
// monitor's sample and what the proxy learned since.
func replayedAt(snap *Snapshot, i int, learned []NodeReplay) LSN {
	n := &snap.Nodes[i]
	pos := n.WALPosition
	for _, r := range learned {
		if r.Node == n.Name && r.LSN > pos {
			pos = r.LSN
		}
	}
	return pos
}
