package proxy

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/route"
)

// noticeDecisions are decisions whose NOTICE a session writes on the hot path.
var noticeDecisions = []route.Decision{
	{Node: "pg2", Role: route.RoleStandby, Reason: route.ReasonReadOnly, Lag: 12 * time.Millisecond, LagKnown: true},
	{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonWrite, Subject: "public.accounts"},
	{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonInTransaction},
	{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonFallbackPrimary, FallbackRule: "REPLICA_LAG_EXCEEDED"},
	{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonUnknownEffect, Subject: `public."odd name"(int)`},
	{Node: "pg3", Role: route.RoleStandby, Reason: route.ReasonHint, Lag: 1500 * time.Millisecond, LagKnown: true},
}

// TestWriteNoticeFrame checks that the NOTICE frame a session writes decodes
// to the fields the route package renders for the decision.
func TestWriteNoticeFrame(t *testing.T) {
	for _, dec := range noticeDecisions {
		var out bytes.Buffer
		sess := relaySession(&out)
		sess.notice = noticeOn
		sess.srv.settings.Store(&liveSettings{policy: route.Policy{MaxReplicaLag: time.Second}})
		sess.writeNotice(dec, nil)
		if err := sess.client.w.Flush(); err != nil {
			t.Fatal(err)
		}
		frame := out.Bytes()
		if len(frame) < 5 || frame[0] != 'N' {
			t.Fatalf("%v: wrote %q, want a NoticeResponse", dec.Reason, frame)
		}
		var got pgproto3.NoticeResponse
		if err := got.Decode(frame[5:]); err != nil {
			t.Fatalf("%v: %v", dec.Reason, err)
		}
		if n := int(frame[1])<<24 | int(frame[2])<<16 | int(frame[3])<<8 | int(frame[4]); n != len(frame)-1 {
			t.Errorf("%v: length field %d, frame has %d bytes after the type", dec.Reason, n, len(frame)-1)
		}
		want := pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000",
			Message: dec.NoticeMessage(time.Second), Detail: dec.NoticeDetail()}
		if got.Severity != want.Severity || got.SeverityUnlocalized != want.SeverityUnlocalized || got.Code != want.Code ||
			got.Message != want.Message || got.Detail != want.Detail {
			t.Errorf("%v: decoded %+v\nwant %+v", dec.Reason, got, want)
		}
	}
}

// TestWriteNoticeOff checks that a session without notices writes nothing.
func TestWriteNoticeOff(t *testing.T) {
	var out bytes.Buffer
	sess := relaySession(&out)
	sess.writeNotice(noticeDecisions[0], nil)
	sess.client.w.Flush()
	if out.Len() != 0 {
		t.Fatalf("wrote %q with notices off", out.Bytes())
	}
}

// BenchmarkWriteNotice measures the routing NOTICE a session adds to each
// statement (routing.notice on).
func BenchmarkWriteNotice(b *testing.B) {
	sess := relaySession(io.Discard)
	sess.notice = noticeOn
	sess.srv.settings.Store(&liveSettings{policy: route.Policy{MaxReplicaLag: time.Second}})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sess.writeNotice(noticeDecisions[i%2], nil)
	}
}

// TestWriteNoticeDoesNotAllocate guards the hot path: with routing.notice on
// (the default) every statement gets a NOTICE.
func TestWriteNoticeDoesNotAllocate(t *testing.T) {
	sess := relaySession(io.Discard)
	sess.notice = noticeOn
	sess.srv.settings.Store(&liveSettings{policy: route.Policy{MaxReplicaLag: time.Second}})
	for _, dec := range noticeDecisions {
		if n := testing.AllocsPerRun(100, func() { sess.writeNotice(dec, nil) }); n != 0 {
			t.Errorf("%v: %.1f allocations per NOTICE, want 0", dec.Reason, n)
		}
	}
}
