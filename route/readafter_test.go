package route_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgowl/pgowl/route"
)

func TestLSNTextForm(t *testing.T) {
	for _, text := range []string{"0/0", "0/3000148", "16/B374D848", "FFFFFFFF/FFFFFFFF"} {
		l, err := route.ParseLSN(text)
		if err != nil {
			t.Fatalf("ParseLSN(%q): %v", text, err)
		}
		if got := l.String(); got != text {
			t.Errorf("ParseLSN(%q).String() = %q", text, got)
		}
	}
	for _, bad := range []string{"", "3000148", "0/", "/1", "0/x", "1/2/3", "100000000/0", "0/3000148 junk"} {
		if _, err := route.ParseLSN(bad); err == nil {
			t.Errorf("ParseLSN(%q) succeeded", bad)
		}
	}
}

func TestWritePositionOnlyMovesForward(t *testing.T) {
	p := func(lsn route.LSN, tl uint32) route.WritePosition { return route.WritePosition{LSN: lsn, Timeline: tl} }
	cases := []struct {
		name       string
		have, next route.WritePosition
		want       route.WritePosition
	}{
		{"from nothing", p(0, 0), p(100, 1), p(100, 1)},
		{"a later write raises", p(100, 1), p(200, 1), p(200, 1)},
		{"an earlier position never lowers", p(200, 1), p(100, 1), p(200, 1)},
		{"nothing keeps", p(200, 1), p(0, 0), p(200, 1)},
		{"a newer timeline replaces", p(900, 1), p(100, 2), p(100, 2)},
		{"an older timeline does not", p(100, 2), p(900, 1), p(100, 2)},
		{"a token without timeline raises and keeps the timeline", p(100, 2), p(300, 0), p(300, 2)},
	}
	for _, c := range cases {
		if got := c.have.Raise(c.next); got != c.want {
			t.Errorf("%s: %v.Raise(%v) = %v, want %v", c.name, c.have, c.next, got, c.want)
		}
	}
}

// TestReadYourWritesNoticeAndRefusal checks the words of the NOTICE of a read
// sent to the primary, and that a refusal's DETAIL carries the position.
func TestReadYourWritesNoticeAndRefusal(t *testing.T) {
	d := route.Decision{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonReadYourWrites, LagKnown: true,
		ReadAfter: 0x3000148, NodeReplay: 0x3000060, Behind: "pg2"}
	if got, want := d.NoticeMessage(0), "pgowl: pg1 (primary) ran this statement: it only reads, but pg2 had not replayed this session's last write (0/3000148; it is at 0/3000060)"; got != want {
		t.Errorf("notice:\n got %q\nwant %q", got, want)
	}
	if got, want := d.NoticeDetail(), "node=pg1 role=primary reason=READ_YOUR_WRITES lag_ms=0 wait_lsn=0/3000148 node_lsn=0/3000060"; got != want {
		t.Errorf("detail:\n got %q\nwant %q", got, want)
	}
	d.NodeReplay = 0
	if got, want := d.NoticeDetail(), "node=pg1 role=primary reason=READ_YOUR_WRITES lag_ms=0 wait_lsn=0/3000148"; got != want {
		t.Errorf("detail without node position:\n got %q\nwant %q", got, want)
	}

	cases := loadPlanCases(t)
	for _, c := range cases {
		if c.Expected.ErrorCode != "REPLICA_LAG_EXCEEDED" || c.Session.ReadAfter == 0 || !c.Session.ReadAfterWaitOver {
			continue
		}
		_, err := route.Plan(c.request(t))
		var rerr *route.Error
		if !errors.As(err, &rerr) {
			t.Fatalf("%s: err = %v", c.Comment, err)
		}
		if !strings.HasPrefix(rerr.Detail, "wait_lsn="+c.Session.ReadAfter.String()+"\n") || !strings.Contains(rerr.Detail, "pg2: standby up") {
			t.Errorf("%s: detail %q lacks the position or the nodes", c.Comment, rerr.Detail)
		}
		return
	}
	t.Fatal("no golden case refuses a read after the wait")
}

// A read held for a definition change it rests on says so, in the NOTICE of its run on the
// primary and in the refusal, naming the change when it can.
func TestReadHeldForADefinitionChangeSaysWhichChange(t *testing.T) {
	d := route.Decision{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonReadYourWrites, LagKnown: true,
		ReadAfter: 0x3000148, Behind: "pg2", ReadAfterChange: true, ReadAfterChanged: "f_report"}
	if got, want := d.NoticeMessage(0), "pgowl: pg1 (primary) ran this statement: it only reads, but pg2 had not replayed the change of f_report this read rests on (0/3000148)"; got != want {
		t.Errorf("notice:\n got %q\nwant %q", got, want)
	}
	d.ReadAfterChanged = ""
	if got, want := d.NoticeMessage(0), "pgowl: pg1 (primary) ran this statement: it only reads, but pg2 had not replayed a definition change this read rests on (0/3000148)"; got != want {
		t.Errorf("notice of an unnamed change:\n got %q\nwant %q", got, want)
	}

	for _, c := range loadPlanCases(t) {
		if c.Expected.ErrorCode != "REPLICA_LAG_EXCEEDED" || c.Session.ReadAfter == 0 || !c.Session.ReadAfterWaitOver {
			continue
		}
		r := c.request(t)
		r.Session.ReadAfterChange, r.Session.ReadAfterChanged = true, "f_report"
		_, err := route.Plan(r)
		var rerr *route.Error
		if !errors.As(err, &rerr) || !strings.Contains(rerr.Error(), "no standby replayed the change of f_report this read rests on") {
			t.Errorf("%s: refusal %v does not name the change", c.Comment, err)
		}
		return
	}
	t.Fatal("no golden case refuses a read after the wait")
}
