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
	pos, _ := u.get(context.Background(), k, time.Now().Add(5*time.Second))
	if pos.LSN != 0x3000148 {
		t.Errorf("got %s, want the position being read, 0/3000148", pos.LSN)
	}
	// A position never goes back.
	u.begin(k)
	u.end(k, route.WritePosition{LSN: 0x100, Timeline: 1}, route.WritePosition{LSN: 0x90, Timeline: 1})
	if pos, flush := u.get(context.Background(), k, time.Now()); pos.LSN != 0x3000148 || flush.LSN != 0x3000148 {
		t.Errorf("after an older position: %s (flush seen %s)", pos.LSN, flush.LSN)
	}
	// A read that fails leaves the position as it was, and waits no more.
	u.begin(k)
	u.end(k, route.WritePosition{}, route.WritePosition{})
	start := time.Now()
	if pos, _ := u.get(context.Background(), k, time.Now().Add(time.Second)); pos.LSN != 0x3000148 || time.Since(start) > 500*time.Millisecond {
		t.Errorf("after a failed read: %s after %s", pos.LSN, time.Since(start))
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
