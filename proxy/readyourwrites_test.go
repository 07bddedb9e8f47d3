package proxy

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

func TestStartupReadAfterIsTakenOutOfTheOptions(t *testing.T) {
	cases := []struct {
		options, left string
		want          route.LSN
		removed       bool
	}{
		{"-c pgowl.read_after=0/3000148", "", 0x3000148, true},
		{"-c search_path=lib -c pgowl.read_after=16/B374D848 -c work_mem=4MB", "-c search_path=lib -c work_mem=4MB", 0x16B374D848, false},
		{"--pgowl.read_after=0/10", "", 0x10, true},
		{"-cpgowl.read_after=0/20 -c work_mem=4MB", "-c work_mem=4MB", 0x20, false},
		{"-c work_mem=4MB", "-c work_mem=4MB", 0, false},
	}
	for _, c := range cases {
		sess := &session{}
		params := map[string]string{"options": c.options}
		if err := sess.startupReadAfter(params); err != nil {
			t.Fatalf("%q: %v", c.options, err)
		}
		left, ok := params["options"]
		if c.removed == ok || left != c.left {
			t.Errorf("%q: options left %q (present %t), want %q", c.options, left, ok, c.left)
		}
		if sess.ryw.token.LSN != c.want {
			t.Errorf("%q: token %s, want %s", c.options, sess.ryw.token.LSN, c.want)
		}
	}
	sess := &session{}
	if err := sess.startupReadAfter(map[string]string{"options": "-c pgowl.read_after=junk"}); err == nil || err.SQLState != sqlstateInvalidParamValue {
		t.Errorf("a malformed startup token: err = %v, want SQLSTATE %s", err, sqlstateInvalidParamValue)
	}
}

func TestFirstColumnsOfADataRow(t *testing.T) {
	row := func(cols ...[]byte) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(len(cols)))
		for _, c := range cols {
			if c == nil {
				b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
				continue
			}
			b = binary.BigEndian.AppendUint32(b, uint32(len(c)))
			b = append(b, c...)
		}
		return b
	}
	if a, b := firstColumns(row([]byte("0/3000148"), []byte("0/3000100"))); a != "0/3000148" || b != "0/3000100" {
		t.Errorf("two columns: %q, %q", a, b)
	}
	if a, b := firstColumns(row(nil, []byte("x"))); a != "" || b != "x" {
		t.Errorf("NULL first: %q, %q", a, b)
	}
	if a := string(firstColumn(row([]byte("0/1")))); a != "0/1" {
		t.Errorf("one column: %q", a)
	}
	if a, b := firstColumns([]byte{0, 2, 0, 0, 0, 9, 'x'}); a != "" || b != "" {
		t.Errorf("a truncated row: %q, %q", a, b)
	}
}

// TestUserPositionsWaitForAPositionBeingRead checks that a read of a user's
// position waits while another session of the user reads its write's
// position, and gets it.
func TestUserPositionsWaitForAPositionBeingRead(t *testing.T) {
	var u userWritePositions
	k := userKey{"app", "db"}
	u.begin(k)
	go func() {
		time.Sleep(20 * time.Millisecond)
		u.end(k, route.WritePosition{LSN: 0x3000148, Timeline: 1}, route.WritePosition{LSN: 0x3000148, Timeline: 1})
	}()
	none := &route.Snapshot{}
	pos, _ := u.get(context.Background(), k, time.Now().Add(5*time.Second), none)
	if pos.LSN != 0x3000148 {
		t.Errorf("got %s, want the position being read, 0/3000148", pos.LSN)
	}
	// A position never goes back.
	u.begin(k)
	u.end(k, route.WritePosition{LSN: 0x100, Timeline: 1}, route.WritePosition{LSN: 0x90, Timeline: 1})
	if pos, flush := u.get(context.Background(), k, time.Now(), none); pos.LSN != 0x3000148 || flush.LSN != 0x3000148 {
		t.Errorf("after an older position: %s (flush seen %s)", pos.LSN, flush.LSN)
	}
}

// TestAUsersPositionLeftUnreadIsTakenFromTheNextSampleOfThePrimary: when the position of a
// user's committed write could not be read (no primary backend beside a chained transaction, a
// failed query), the user's other sessions must still see the write. Until the monitor's next
// sample of the primary their reads take the unread position (no standby is known to have the
// write); the first sample sent after the failure covers the write and becomes the position.
func TestAUsersPositionLeftUnreadIsTakenFromTheNextSampleOfThePrimary(t *testing.T) {
	var u userWritePositions
	k := userKey{"app", "db"}
	u.begin(k)
	u.end(k, route.WritePosition{LSN: 0x3000148, Timeline: 1}, route.WritePosition{LSN: 0x3000148, Timeline: 1})
	before := time.Now()
	u.begin(k)
	u.end(k, route.WritePosition{}, route.WritePosition{})
	primary := func(lsn route.LSN, sampledAt time.Time) *route.Snapshot {
		return &route.Snapshot{Nodes: []route.NodeState{{Name: "pg1", Up: true, Role: route.RolePrimary, Timeline: 1, WALPosition: lsn, SampledAt: sampledAt}}}
	}
	start := time.Now()
	if pos, _ := u.get(context.Background(), k, time.Now().Add(time.Second), primary(0x3000200, before)); pos.LSN != route.UnreadLSN || pos.Timeline != 1 || time.Since(start) > 500*time.Millisecond {
		t.Errorf("after a failed read, with the primary sampled before it: %s on timeline %d after %s; want the unread position at once", pos.LSN, pos.Timeline, time.Since(start))
	}
	after := time.Now().Add(time.Millisecond)
	if pos, _ := u.get(context.Background(), k, time.Now(), primary(0x3000400, after)); pos.LSN != 0x3000400 {
		t.Errorf("with the primary sampled after the failed read: %s, want its position then, 0/3000400", pos.LSN)
	}
	// The first sample after the failure is kept: a later one does not raise the position.
	if pos, _ := u.get(context.Background(), k, time.Now(), primary(0x3000900, after.Add(time.Second))); pos.LSN != 0x3000400 {
		t.Errorf("with a later sample: %s, want the first sample's position kept, 0/3000400", pos.LSN)
	}
}

// TestAUsersPositionStillBeingReadAtTheDeadlineCountsAsUnread: a read of a user's position
// waits for another session's read of its write's position only until its deadline. Past it,
// that write may be on no standby yet: the read takes the primary's position from a sample sent
// after the write was announced, or the unread position (no standby is known to have it), never
// the position from before the write.
func TestAUsersPositionStillBeingReadAtTheDeadlineCountsAsUnread(t *testing.T) {
	var u userWritePositions
	k := userKey{"app", "db"}
	u.begin(k)
	u.end(k, route.WritePosition{LSN: 0x3000148, Timeline: 1}, route.WritePosition{LSN: 0x3000148, Timeline: 1})
	before := time.Now()
	u.begin(k) // a write whose position is being read, and stays so
	primary := func(lsn route.LSN, sampledAt time.Time) *route.Snapshot {
		return &route.Snapshot{Nodes: []route.NodeState{{Name: "pg1", Up: true, Role: route.RolePrimary, Timeline: 1, WALPosition: lsn, SampledAt: sampledAt}}}
	}
	if pos, _ := u.get(context.Background(), k, time.Now().Add(20*time.Millisecond), primary(0x3000200, before)); pos.LSN != route.UnreadLSN || pos.Timeline != 1 {
		t.Errorf("past the deadline, with the primary sampled before the write: %s on timeline %d; want the unread position", pos.LSN, pos.Timeline)
	}
	after := time.Now().Add(time.Millisecond)
	if pos, _ := u.get(context.Background(), k, time.Now(), primary(0x3000400, after)); pos.LSN != 0x3000400 {
		t.Errorf("past the deadline, with the primary sampled after the write: %s, want its position then, 0/3000400", pos.LSN)
	}
	// The read in flight ends: its position is the user's, and nothing stays unread.
	u.end(k, route.WritePosition{LSN: 0x3000300, Timeline: 1}, route.WritePosition{LSN: 0x3000300, Timeline: 1})
	if pos, _ := u.get(context.Background(), k, time.Now(), primary(0x3000200, before)); pos.LSN != 0x3000300 {
		t.Errorf("once the read ended: %s, want its position, 0/3000300", pos.LSN)
	}
}

// A lone LISTEN or UNLISTEN runs on the primary but writes no data: the
// session's later reads need not wait for a write position. LISTEN next to
// a write still counts.
func TestListenAloneDoesNotRaiseTheWritePosition(t *testing.T) {
	cls := classify.New(classify.Options{})
	for _, tc := range []struct {
		sql   string
		wrote bool
	}{
		{"LISTEN owl_channel", false},
		{"UNLISTEN *", false},
		{"INSERT INTO t VALUES (1)", true},
		{"INSERT INTO t VALUES (1); LISTEN owl_channel", true},
		{"SELECT 1", false},
		{"BEGIN", false},
	} {
		u := &unit{effects: cls.Classify(tc.sql)}
		if got := unitMayWrite(u); got != tc.wrote {
			t.Errorf("%s: may have written %t, want %t", tc.sql, got, tc.wrote)
		}
	}
}
