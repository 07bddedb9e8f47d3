package pgowlclient

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestParseRouteDetail(t *testing.T) {
	cases := []struct {
		detail string
		want   Route
	}{
		{"node=pg2 role=standby reason=READ_ONLY lag_ms=40 subject=SELECT",
			Route{Node: "pg2", Role: RoleStandby, Reason: "READ_ONLY", LagMS: 40, Subject: "SELECT"}},
		{"node=pg1 role=primary reason=FALLBACK_PRIMARY lag_ms=0 fallback=NO_READABLE_REPLICA",
			Route{Node: "pg1", Role: RolePrimary, Reason: "FALLBACK_PRIMARY", Fallback: "NO_READABLE_REPLICA"}},
		{`node=pg1 role=primary reason=UNKNOWN_EFFECT lag_ms=0 subject="public.f(integer) = \"x\""`,
			Route{Node: "pg1", Role: RolePrimary, Reason: "UNKNOWN_EFFECT", Subject: `public.f(integer) = "x"`}},
		{"node=pg3 role=standby reason=IN_TRANSACTION lag_ms=-1",
			Route{Node: "pg3", Role: RoleStandby, Reason: "IN_TRANSACTION", LagMS: -1}},
		// Fields other helpers add: kept, by name, in Extra.
		{"node=pg2 role=standby reason=READ_ONLY lag_ms=3 subject=SELECT wait_lsn=0/3000060 node_lsn=0/3000100 guard=reports cost=120.5",
			Route{Node: "pg2", Role: RoleStandby, Reason: "READ_ONLY", LagMS: 3, Subject: "SELECT",
				Extra: map[string]string{"wait_lsn": "0/3000060", "node_lsn": "0/3000100", "guard": "reports", "cost": "120.5"}}},
	}
	for _, tc := range cases {
		got, err := ParseRouteDetail(tc.detail)
		if err != nil {
			t.Errorf("%q: %v", tc.detail, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\ngot  %+v\nwant %+v", tc.detail, got, tc.want)
		}
		if got.LagKnown() != (tc.want.LagMS >= 0) {
			t.Errorf("%q: LagKnown = %t", tc.detail, got.LagKnown())
		}
	}
}

func TestParseRouteDetailRequiresTheFixedStart(t *testing.T) {
	for _, detail := range []string{
		"",
		"pg1: primary up lag_ms=0",
		"role=primary node=pg1 reason=WRITE lag_ms=0",
		"node=pg1 role=primary reason=WRITE",
		"node=pg1 role=leader reason=WRITE lag_ms=0",
		"node=pg1 role=primary reason=WRITE lag_ms=soon",
		"node=pg1 role=primary reason=WRITE lag_ms=-2",
		"node= role=primary reason=WRITE lag_ms=0",
	} {
		if r, err := ParseRouteDetail(detail); err == nil {
			t.Errorf("%q parsed as %+v, want an error", detail, r)
		}
	}
}

func TestRouteFromNoticeIgnoresTheNodesOwnNotices(t *testing.T) {
	pgowl := &pgconn.Notice{Severity: "NOTICE", Code: "00000",
		Message: "pgowl: pg1 (primary) ran this statement: it writes",
		Detail:  "node=pg1 role=primary reason=WRITE lag_ms=0"}
	if r, ok := RouteFromNotice(pgowl); !ok || r.Node != "pg1" || r.Message != pgowl.Message {
		t.Errorf("pgowl's NOTICE: got %+v, %t", r, ok)
	}
	for _, n := range []*pgconn.Notice{
		{Severity: "NOTICE", Code: "00000", Message: "table \"x\" does not exist, skipping"},
		{Severity: "NOTICE", Code: "00000", Message: "hello", Detail: "node=pg1 role=primary reason=WRITE lag_ms=0"},
		{Severity: "NOTICE", Code: "00000", Message: "pgowl: paused; 2 transactions still open"},
		{Severity: "WARNING", Code: "25001", Message: "pgowl: x", Detail: "node=pg1 role=primary reason=WRITE lag_ms=0"},
	} {
		if r, ok := RouteFromNotice(n); ok {
			t.Errorf("%q: taken as a route %+v", n.Message, r)
		}
	}
}

func FuzzParseRouteDetail(f *testing.F) {
	f.Add("node=pg2 role=standby reason=READ_ONLY lag_ms=40 subject=SELECT")
	f.Add(`node=pg1 role=primary reason=HINT lag_ms=0 subject="/*pgowl:primary*/ hint"`)
	f.Fuzz(func(t *testing.T, detail string) {
		r, err := ParseRouteDetail(detail)
		if err != nil {
			return
		}
		if r.Node == "" || (r.Role != RolePrimary && r.Role != RoleStandby) || r.LagMS < -1 {
			t.Errorf("accepted %q as %+v", detail, r)
		}
	})
}
