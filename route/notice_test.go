package route_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

func TestNoticeMessage(t *testing.T) {
	primary := func(reason route.Reason, subject string) route.Decision {
		return route.Decision{Node: "pg1", Role: route.RolePrimary, Reason: reason, LagKnown: true, Subject: subject}
	}
	fallback := func(rule string) route.Decision {
		d := primary(route.ReasonFallbackPrimary, "")
		d.FallbackRule = rule
		return d
	}
	tests := []struct {
		name   string
		d      route.Decision
		maxLag time.Duration
		want   string
	}{
		{"read on a standby", route.Decision{Node: "pg2", NodeIndex: 1, Role: route.RoleStandby, Reason: route.ReasonReadOnly, Lag: 40 * time.Millisecond, LagKnown: true},
			5 * time.Second, "pgowl: pg2 (standby) ran this statement: it only reads, and pg2's lag 40ms is within 5s"},
		{"read with fractional seconds", route.Decision{Node: "pg3", Role: route.RoleStandby, Reason: route.ReasonReadOnly, Lag: 1250 * time.Millisecond, LagKnown: true},
			1500 * time.Millisecond, "pgowl: pg3 (standby) ran this statement: it only reads, and pg3's lag 1.25s is within 1.5s"},
		{"read without a limit", route.Decision{Node: "pg2", Role: route.RoleStandby, Reason: route.ReasonReadOnly, Lag: 0, LagKnown: true},
			0, "pgowl: pg2 (standby) ran this statement: it only reads, and pg2's lag 0ms"},
		{"write", primary(route.ReasonWrite, "INSERT"), 5 * time.Second,
			"pgowl: pg1 (primary) ran this statement: it writes (INSERT)"},
		{"write without subject", primary(route.ReasonWrite, ""), 0,
			"pgowl: pg1 (primary) ran this statement: it writes"},
		{"row lock", primary(route.ReasonRowLock, "FOR UPDATE"), 0,
			"pgowl: pg1 (primary) ran this statement: it locks rows (FOR UPDATE)"},
		{"writing function", primary(route.ReasonWritingFunction, "nextval()"), 0,
			"pgowl: pg1 (primary) ran this statement: it calls nextval(), which writes"},
		{"writing function without subject", primary(route.ReasonWritingFunction, ""), 0,
			"pgowl: pg1 (primary) ran this statement: it calls a function that writes"},
		{"unknown effect", primary(route.ReasonUnknownEffect, "myfunc()"), 0,
			"pgowl: pg1 (primary) ran this statement: the effect of myfunc() is unknown, so it ran on the primary"},
		{"unknown effect without subject", primary(route.ReasonUnknownEffect, ""), 0,
			"pgowl: pg1 (primary) ran this statement: its effect is unknown, so it ran on the primary"},
		{"in transaction", primary(route.ReasonInTransaction, ""), 0,
			"pgowl: pg1 (primary) ran this statement: it is part of a transaction that started on pg1"},
		{"fallback, lag", fallback("REPLICA_LAG_EXCEEDED"), 5 * time.Second,
			"pgowl: pg1 (primary) ran this statement: it only reads, but no standby's lag is within 5s (REPLICA_LAG_EXCEEDED), so it fell back to the primary"},
		{"fallback, no replica", fallback("NO_READABLE_REPLICA"), 5 * time.Second,
			"pgowl: pg1 (primary) ran this statement: it only reads, but no standby is up (NO_READABLE_REPLICA), so it fell back to the primary"},
		{"no standby configured", primary(route.ReasonNoStandbyConfigured, ""), 5 * time.Second,
			"pgowl: pg1 (primary) ran this statement: it only reads, but no standby is configured"},
		{"session pinned", primary(route.ReasonSessionPinned, "LISTEN"), 0,
			"pgowl: pg1 (primary) ran this statement: the session is pinned to pg1 (LISTEN)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.NoticeMessage(tt.maxLag); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestNoticeMessageFromDecide checks the notice of real decisions, including
// that the lag shown is the effective lag Decide computed.
func TestNoticeMessageFromDecide(t *testing.T) {
	snap := benchSnapshot()
	pol := route.Policy{MaxReplicaLag: 5 * time.Second, DownAfter: 3 * time.Second}
	req := route.Request{Access: route.AccessRead, Reason: route.ReasonReadOnly}
	d, err := route.Decide(req, snap, pol, testNow)
	if err != nil {
		t.Fatal(err)
	}
	// pg3 has lag 10ms sampled 10ms ago: effective 20ms.
	want := "pgowl: pg3 (standby) ran this statement: it only reads, and pg3's lag 20ms is within 5s"
	if got := d.NoticeMessage(route.EffectiveMaxLag(pol, req)); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got, want := d.NoticeDetail(), "node=pg3 role=standby reason=READ_ONLY lag_ms=20"; got != want {
		t.Errorf("detail got %q, want %q", got, want)
	}
}

func TestNoticeDetail(t *testing.T) {
	tests := []struct {
		name string
		d    route.Decision
		want string
	}{
		{"standby read", route.Decision{Node: "pg2", Role: route.RoleStandby, Reason: route.ReasonReadOnly, Lag: 40 * time.Millisecond, LagKnown: true},
			"node=pg2 role=standby reason=READ_ONLY lag_ms=40"},
		{"primary write with subject", route.Decision{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonWrite, LagKnown: true, Subject: "INSERT"},
			"node=pg1 role=primary reason=WRITE lag_ms=0 subject=INSERT"},
		{"primary lag is always 0", route.Decision{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonWrite, Lag: time.Second, LagKnown: true},
			"node=pg1 role=primary reason=WRITE lag_ms=0"},
		{"subject with a space is quoted", route.Decision{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonRowLock, LagKnown: true, Subject: "FOR UPDATE"},
			`node=pg1 role=primary reason=ROW_LOCK lag_ms=0 subject="FOR UPDATE"`},
		{"subject with a quote is escaped", route.Decision{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonUnknownEffect, LagKnown: true, Subject: `"My"Func()`},
			`node=pg1 role=primary reason=UNKNOWN_EFFECT lag_ms=0 subject="\"My\"Func()"`},
		{"fallback names the rule", route.Decision{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonFallbackPrimary, LagKnown: true, FallbackRule: "REPLICA_LAG_EXCEEDED"},
			"node=pg1 role=primary reason=FALLBACK_PRIMARY lag_ms=0 fallback=REPLICA_LAG_EXCEEDED"},
		{"unknown standby lag", route.Decision{Node: "pg2", Role: route.RoleStandby, Reason: route.ReasonInTransaction},
			"node=pg2 role=standby reason=IN_TRANSACTION lag_ms=-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.d.NoticeDetail()
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			prefix := "node=" + tt.d.Node + " role=" + tt.d.Role.String() + " reason=" + tt.d.Reason.String() + " lag_ms="
			if !strings.HasPrefix(got, prefix) {
				t.Errorf("%q does not begin with %q", got, prefix)
			}
		})
	}
}

// TestEnumsText checks that every enum prints, marshals and parses back,
// and that invalid values are refused rather than silently mapped.
func TestEnumsText(t *testing.T) {
	type textEnum interface {
		String() string
		MarshalText() ([]byte, error)
	}
	tests := []struct {
		value textEnum
		want  string
		parse func([]byte) (any, error)
	}{
		{route.RoleUnknown, "unknown", func(b []byte) (any, error) { var v route.Role; err := v.UnmarshalText(b); return v, err }},
		{route.RolePrimary, "primary", func(b []byte) (any, error) { var v route.Role; err := v.UnmarshalText(b); return v, err }},
		{route.RoleStandby, "standby", func(b []byte) (any, error) { var v route.Role; err := v.UnmarshalText(b); return v, err }},
		{route.AccessRead, "read", func(b []byte) (any, error) { var v route.Access; err := v.UnmarshalText(b); return v, err }},
		{route.AccessWrite, "write", func(b []byte) (any, error) { var v route.Access; err := v.UnmarshalText(b); return v, err }},
		{route.ReasonReadOnly, "READ_ONLY", func(b []byte) (any, error) { var v route.Reason; err := v.UnmarshalText(b); return v, err }},
		{route.ReasonWrite, "WRITE", func(b []byte) (any, error) { var v route.Reason; err := v.UnmarshalText(b); return v, err }},
		{route.ReasonRowLock, "ROW_LOCK", func(b []byte) (any, error) { var v route.Reason; err := v.UnmarshalText(b); return v, err }},
		{route.ReasonWritingFunction, "WRITING_FUNCTION", func(b []byte) (any, error) { var v route.Reason; err := v.UnmarshalText(b); return v, err }},
		{route.ReasonUnknownEffect, "UNKNOWN_EFFECT", func(b []byte) (any, error) { var v route.Reason; err := v.UnmarshalText(b); return v, err }},
		{route.ReasonInTransaction, "IN_TRANSACTION", func(b []byte) (any, error) { var v route.Reason; err := v.UnmarshalText(b); return v, err }},
		{route.ReasonFallbackPrimary, "FALLBACK_PRIMARY", func(b []byte) (any, error) { var v route.Reason; err := v.UnmarshalText(b); return v, err }},
		{route.ReasonNoStandbyConfigured, "NO_STANDBY_CONFIGURED", func(b []byte) (any, error) { var v route.Reason; err := v.UnmarshalText(b); return v, err }},
		{route.ReasonSessionPinned, "SESSION_PINNED", func(b []byte) (any, error) { var v route.Reason; err := v.UnmarshalText(b); return v, err }},
		{route.LeastLag, "least_lag", func(b []byte) (any, error) { var v route.StandbyChoice; err := v.UnmarshalText(b); return v, err }},
		{route.RoundRobin, "round_robin", func(b []byte) (any, error) { var v route.StandbyChoice; err := v.UnmarshalText(b); return v, err }},
		{route.LeastConnections, "least_connections", func(b []byte) (any, error) { var v route.StandbyChoice; err := v.UnmarshalText(b); return v, err }},
		{route.Reject, "reject", func(b []byte) (any, error) { var v route.NoStandbyRule; err := v.UnmarshalText(b); return v, err }},
		{route.UsePrimary, "use_primary", func(b []byte) (any, error) { var v route.NoStandbyRule; err := v.UnmarshalText(b); return v, err }},
		{route.NoReadableReplica, "NO_READABLE_REPLICA", func(b []byte) (any, error) { var v route.Code; err := v.UnmarshalText(b); return v, err }},
		{route.ReplicaLagExceeded, "REPLICA_LAG_EXCEEDED", func(b []byte) (any, error) { var v route.Code; err := v.UnmarshalText(b); return v, err }},
		{route.NoPrimary, "NO_PRIMARY", func(b []byte) (any, error) { var v route.Code; err := v.UnmarshalText(b); return v, err }},
		{route.DatabaseBusy, "DATABASE_BUSY", func(b []byte) (any, error) { var v route.Code; err := v.UnmarshalText(b); return v, err }},
	}
	for _, tt := range tests {
		if got := tt.value.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
		text, err := tt.value.MarshalText()
		if err != nil || string(text) != tt.want {
			t.Errorf("MarshalText() = %q, %v; want %q", text, err, tt.want)
		}
		back, err := tt.parse(text)
		if err != nil || back != any(tt.value) {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", text, back, err, tt.value)
		}
		if _, err := tt.parse([]byte(strings.ToLower(tt.want) + "x")); err == nil {
			t.Errorf("UnmarshalText accepted a bad %q", tt.want+"x")
		}
	}
	if _, err := route.Role(9).MarshalText(); err == nil {
		t.Error("MarshalText of an invalid role succeeded")
	}
	if _, err := route.Code(0).MarshalText(); err == nil {
		t.Error("MarshalText of code 0 succeeded")
	}
	// Decisions serialise with readable enums.
	out, err := json.Marshal(route.Decision{Node: "pg1", Role: route.RolePrimary, Reason: route.ReasonWrite})
	if err != nil || !strings.Contains(string(out), `"Role":"primary"`) || !strings.Contains(string(out), `"Reason":"WRITE"`) {
		t.Errorf("json of a decision = %s, %v", out, err)
	}
}

func TestCodeSQLState(t *testing.T) {
	tests := []struct {
		code route.Code
		want string
	}{
		{route.NoReadableReplica, "57P03"},
		{route.ReplicaLagExceeded, "57P03"},
		{route.NoPrimary, "57P03"},
		{route.DatabaseBusy, "53300"},
		{route.InvalidRequest, "XX000"},
	}
	for _, tt := range tests {
		if got := tt.code.SQLState(); got != tt.want {
			t.Errorf("%s: SQLState %q, want %q", tt.code, got, tt.want)
		}
		e := route.NewError(tt.code, "what happened", "pg1: primary up")
		if e.SQLState != tt.want || !strings.HasPrefix(e.Message, "pgowl: "+tt.code.String()+": what happened") || e.Hint == "" || e.Detail != "pg1: primary up" {
			t.Errorf("NewError(%s) = %+v", tt.code, e)
		}
	}
}
