package route_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

const casesFile = "testdata/decide_cases.json"

// testNow is the fixed "now" every golden case is evaluated at.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type decideCase struct {
	Comment  string       `json:"comment"`
	Policy   casePolicy   `json:"policy"`
	Snapshot caseSnapshot `json:"snapshot"`
	Request  caseRequest  `json:"request"`
	Expected caseExpected `json:"expected"`
}

type casePolicy struct {
	MaxReplicaLagMS    int64               `json:"max_replica_lag_ms"`
	MaxReplicaLagBytes uint64              `json:"max_replica_lag_bytes"`
	StandbyChoice      route.StandbyChoice `json:"standby_choice"`
	WhenNoStandby      route.NoStandbyRule `json:"when_no_standby"`
	DownAfterMS        int64               `json:"down_after_ms"`
	// ReadYourWritesReject is routing.read_your_writes_fallback: reject.
	ReadYourWritesReject bool `json:"read_your_writes_reject,omitempty"`
}

type caseSnapshot struct {
	Nodes                 []caseNode `json:"nodes"`
	NewestPrimaryTimeline uint32     `json:"newest_primary_timeline,omitempty"`
}

type caseNode struct {
	Name        string     `json:"name"`
	Role        route.Role `json:"role"`
	Up          bool       `json:"up"`
	Timeline    uint32     `json:"timeline"`
	LagMS       *int64     `json:"lag_ms"` // null: lag unknown
	LagBytes    uint64     `json:"lag_bytes"`
	SampleAgeMS *int64     `json:"sample_age_ms"` // null: never sampled
	InUse       int        `json:"in_use"`
	LastError   string     `json:"last_error,omitempty"`
	// WALLSN is the sampled insert (primary) or replay (standby) position.
	WALLSN route.LSN `json:"wal_lsn,omitempty"`
	// Load is the node's load as the monitor read it; absent: not known.
	Load *caseLoad `json:"load,omitempty"`
}

type caseLoad struct {
	Active         int `json:"active"`
	LockWaiting    int `json:"lock_waiting"`
	MaxConnections int `json:"max_connections"`
}

type caseRequest struct {
	Access          route.Access `json:"access"`
	Reason          route.Reason `json:"reason"`
	Subject         string       `json:"subject"`
	SessionMaxLagMS int64        `json:"session_max_lag_ms"`
	Turn            uint64       `json:"turn"`
}

// caseExpected holds either a decision (node, role, reason, lag_ms and, for
// fallbacks, fallback_rule) or an error_code with optional detail substrings.
type caseExpected struct {
	Node           string   `json:"node,omitempty"`
	Role           string   `json:"role,omitempty"`
	Reason         string   `json:"reason,omitempty"`
	LagMS          *int64   `json:"lag_ms,omitempty"`
	FallbackRule   string   `json:"fallback_rule,omitempty"`
	ErrorCode      string   `json:"error_code,omitempty"`
	DetailContains []string `json:"detail_contains,omitempty"`
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func (c decideCase) inputs() (route.Request, *route.Snapshot, route.Policy) {
	pol := route.Policy{
		MaxReplicaLag:      ms(c.Policy.MaxReplicaLagMS),
		MaxReplicaLagBytes: c.Policy.MaxReplicaLagBytes,
		StandbyChoice:      c.Policy.StandbyChoice,
		WhenNoStandby:      c.Policy.WhenNoStandby,
		DownAfter:          ms(c.Policy.DownAfterMS),

		ReadYourWritesReject: c.Policy.ReadYourWritesReject,
	}
	snap := &route.Snapshot{TakenAt: testNow, NewestPrimaryTimeline: c.Snapshot.NewestPrimaryTimeline}
	for i, n := range c.Snapshot.Nodes {
		state := route.NodeState{
			Name:      n.Name,
			Addr:      "127.0.0.1:" + strconv.Itoa(5432+i),
			Up:        n.Up,
			Role:      n.Role,
			Timeline:  n.Timeline,
			LagBytes:  n.LagBytes,
			InUse:     n.InUse,
			LastError: n.LastError,

			WALPosition: n.WALLSN,
		}
		if n.LagMS != nil {
			state.LagKnown = true
			state.Lag = ms(*n.LagMS)
		}
		if n.SampleAgeMS != nil {
			state.SampledAt = testNow.Add(-ms(*n.SampleAgeMS))
		}
		if n.Load != nil {
			state.Load = route.NodeLoad{Known: true, Active: n.Load.Active, LockWaiting: n.Load.LockWaiting, MaxConnections: n.Load.MaxConnections}
		}
		snap.Nodes = append(snap.Nodes, state)
	}
	req := route.Request{
		Access:        c.Request.Access,
		Reason:        c.Request.Reason,
		Subject:       c.Request.Subject,
		SessionMaxLag: ms(c.Request.SessionMaxLagMS),
		Turn:          c.Request.Turn,
	}
	return req, snap, pol
}

func loadCases(t testing.TB) []decideCase { return loadGolden[decideCase](t, casesFile) }

// loadGolden reads a golden table of cases of type C, refusing unknown fields.
func loadGolden[C any](t testing.TB, path string) []C {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cases []C
	if err := dec.Decode(&cases); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return cases
}

// outcome turns Decide's result into the golden form.
func outcome(d route.Decision, err error) caseExpected {
	if err != nil {
		var rerr *route.Error
		if !errors.As(err, &rerr) {
			return caseExpected{ErrorCode: "NOT_A_ROUTE_ERROR: " + err.Error()}
		}
		return caseExpected{ErrorCode: rerr.Code.String()}
	}
	lag := d.Lag.Milliseconds()
	return caseExpected{
		Node:         d.Node,
		Role:         d.Role.String(),
		Reason:       d.Reason.String(),
		LagMS:        &lag,
		FallbackRule: d.FallbackRule,
	}
}

func TestDecideGolden(t *testing.T) {
	cases := loadCases(t)
	if len(cases) < 40 {
		t.Fatalf("%s has %d cases, want at least 40", casesFile, len(cases))
	}
	actual := make([]decideCase, len(cases))
	failed := false
	for i, c := range cases {
		req, snap, pol := c.inputs()
		d, err := route.Decide(req, snap, pol, testNow)
		got := outcome(d, err)
		got.DetailContains = c.Expected.DetailContains
		actual[i] = c
		actual[i].Expected = got

		want := c.Expected
		if !reflect.DeepEqual(got, want) {
			failed = true
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(want)
			t.Errorf("case %d %q:\n got %s\nwant %s", i, c.Comment, gotJSON, wantJSON)
			if err != nil {
				t.Logf("error detail:\n%s", detailOf(err))
			}
			continue
		}
		if err != nil {
			checkErrorShape(t, c, snap, err)
		} else {
			checkDecisionShape(t, c, req, snap, d)
		}
	}
	actualPath := filepath.Join("testdata", "decide_cases.actual.json")
	if failed {
		out, err := json.MarshalIndent(actual, "", "  ")
		if err != nil {
			t.Fatalf("marshal actual cases: %v", err)
		}
		if err := os.WriteFile(actualPath, append(out, '\n'), 0o644); err != nil {
			t.Fatalf("write %s: %v", actualPath, err)
		}
		t.Fatalf("golden mismatch: actual results written to %s; if the change is intended, copy it over %s", actualPath, casesFile)
	}
	_ = os.Remove(actualPath)
}

func detailOf(err error) string {
	var rerr *route.Error
	if errors.As(err, &rerr) {
		return rerr.Detail
	}
	return ""
}

// checkErrorShape checks what every routing error must carry.
func checkErrorShape(t *testing.T, c decideCase, snap *route.Snapshot, err error) {
	t.Helper()
	var rerr *route.Error
	if !errors.As(err, &rerr) {
		t.Errorf("%q: error %T is not *route.Error", c.Comment, err)
		return
	}
	if rerr.SQLState != rerr.Code.SQLState() {
		t.Errorf("%q: SQLState %q, want %q", c.Comment, rerr.SQLState, rerr.Code.SQLState())
	}
	if prefix := "pgowl: " + rerr.Code.String(); !strings.HasPrefix(rerr.Message, prefix) {
		t.Errorf("%q: message %q does not start with %q", c.Comment, rerr.Message, prefix)
	}
	if rerr.Error() != rerr.Message {
		t.Errorf("%q: Error() %q differs from Message", c.Comment, rerr.Error())
	}
	if rerr.Hint == "" {
		t.Errorf("%q: empty hint", c.Comment)
	}
	if rerr.Code == route.InvalidRequest {
		return
	}
	if !strings.Contains(rerr.Hint, "transient") {
		t.Errorf("%q: hint %q does not say the condition is transient", c.Comment, rerr.Hint)
	}
	var lines []string
	if rerr.Detail != "" {
		lines = strings.Split(rerr.Detail, "\n")
	}
	if len(lines) != len(snap.Nodes) {
		t.Errorf("%q: detail has %d lines for %d nodes:\n%s", c.Comment, len(lines), len(snap.Nodes), rerr.Detail)
	} else {
		for i, line := range lines {
			n := snap.Nodes[i]
			if !strings.HasPrefix(line, n.Name+": "+n.Role.String()+" ") || !strings.Contains(line, " sample_age_ms=") {
				t.Errorf("%q: detail line %d %q does not describe node %s", c.Comment, i, line, n.Name)
			}
		}
	}
	for _, want := range c.Expected.DetailContains {
		if !strings.Contains(rerr.Detail, want) {
			t.Errorf("%q: detail lacks %q:\n%s", c.Comment, want, rerr.Detail)
		}
	}
}

// checkDecisionShape checks the decision fields the golden form leaves out.
func checkDecisionShape(t *testing.T, c decideCase, req route.Request, snap *route.Snapshot, d route.Decision) {
	t.Helper()
	if d.NodeIndex < 0 || d.NodeIndex >= len(snap.Nodes) || snap.Nodes[d.NodeIndex].Name != d.Node {
		t.Errorf("%q: NodeIndex %d does not name %s", c.Comment, d.NodeIndex, d.Node)
		return
	}
	if !d.LagKnown {
		t.Errorf("%q: LagKnown false in a decision", c.Comment)
	}
	if d.Subject != req.Subject {
		t.Errorf("%q: Subject %q, want %q", c.Comment, d.Subject, req.Subject)
	}
	chosen := snap.Nodes[d.NodeIndex]
	if d.Role == route.RoleStandby && d.LagBytes != chosen.LagBytes {
		t.Errorf("%q: LagBytes %d, want %d", c.Comment, d.LagBytes, chosen.LagBytes)
	}
	if d.Role == route.RolePrimary && (d.Lag != 0 || d.LagBytes != 0) {
		t.Errorf("%q: primary decision has lag %s / %d bytes", c.Comment, d.Lag, d.LagBytes)
	}
	if (d.Reason == route.ReasonFallbackPrimary) != (d.FallbackRule != "") {
		t.Errorf("%q: reason %s with fallback rule %q", c.Comment, d.Reason, d.FallbackRule)
	}
}

// TestDecideDoesNotModifySnapshot guards the contract that snapshots are shared read-only.
func TestDecideDoesNotModifySnapshot(t *testing.T) {
	for _, c := range loadCases(t) {
		req, snap, pol := c.inputs()
		before := append([]route.NodeState(nil), snap.Nodes...)
		_, _ = route.Decide(req, snap, pol, testNow)
		if !reflect.DeepEqual(before, snap.Nodes) {
			t.Fatalf("%q: Decide modified the snapshot", c.Comment)
		}
	}
}

func TestDecideNilSnapshot(t *testing.T) {
	pol := route.Policy{MaxReplicaLag: time.Second, DownAfter: time.Second}
	_, err := route.Decide(route.Request{Access: route.AccessWrite, Reason: route.ReasonWrite}, nil, pol, testNow)
	var rerr *route.Error
	if !errors.As(err, &rerr) || rerr.Code != route.NoPrimary {
		t.Fatalf("nil snapshot write: got %v, want NO_PRIMARY", err)
	}
}

func TestRoundRobinSpreadsTurns(t *testing.T) {
	snap := benchSnapshot()
	pol := route.Policy{MaxReplicaLag: 5 * time.Second, DownAfter: 3 * time.Second, StandbyChoice: route.RoundRobin}
	counts := map[string]int{}
	for turn := uint64(0); turn < 100; turn++ {
		d, err := route.Decide(route.Request{Access: route.AccessRead, Reason: route.ReasonReadOnly, Turn: turn}, snap, pol, testNow)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		counts[d.Node]++
	}
	if want := map[string]int{"pg2": 50, "pg3": 50}; !reflect.DeepEqual(counts, want) {
		t.Fatalf("round robin counts %v, want %v", counts, want)
	}
}

func TestEffectiveMaxLag(t *testing.T) {
	pol := route.Policy{MaxReplicaLag: 5 * time.Second}
	tests := []struct {
		session time.Duration
		want    time.Duration
	}{
		{0, 5 * time.Second},
		{time.Second, time.Second},
		{5 * time.Second, 5 * time.Second},
		{time.Minute, 5 * time.Second},
		{-time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := route.EffectiveMaxLag(pol, route.Request{SessionMaxLag: tt.session}); got != tt.want {
			t.Errorf("session %s: got %s, want %s", tt.session, got, tt.want)
		}
	}
}

func benchSnapshot() *route.Snapshot {
	return &route.Snapshot{
		TakenAt: testNow,
		Nodes: []route.NodeState{
			{Name: "pg1", Addr: "127.0.0.1:5432", Up: true, Role: route.RolePrimary, Timeline: 1, LagKnown: true, SampledAt: testNow.Add(-20 * time.Millisecond)},
			{Name: "pg2", Addr: "127.0.0.1:5433", Up: true, Role: route.RoleStandby, Timeline: 1, LagKnown: true, Lag: 40 * time.Millisecond, LagBytes: 512, SampledAt: testNow.Add(-15 * time.Millisecond)},
			{Name: "pg3", Addr: "127.0.0.1:5434", Up: true, Role: route.RoleStandby, Timeline: 1, LagKnown: true, Lag: 10 * time.Millisecond, SampledAt: testNow.Add(-10 * time.Millisecond)},
		},
	}
}

func TestDecideSuccessDoesNotAllocate(t *testing.T) {
	snap := benchSnapshot()
	for _, choice := range []route.StandbyChoice{route.LeastLag, route.RoundRobin, route.LeastConnections} {
		pol := route.Policy{MaxReplicaLag: 5 * time.Second, DownAfter: 3 * time.Second, StandbyChoice: choice}
		read := route.Request{Access: route.AccessRead, Reason: route.ReasonReadOnly, Subject: "SELECT"}
		write := route.Request{Access: route.AccessWrite, Reason: route.ReasonWrite, Subject: "INSERT"}
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := route.Decide(read, snap, pol, testNow); err != nil {
				t.Fatal(err)
			}
			if _, err := route.Decide(write, snap, pol, testNow); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per read+write decision, want 0", choice, allocs)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	snap := benchSnapshot()
	pol := route.Policy{MaxReplicaLag: 5 * time.Second, DownAfter: 3 * time.Second}
	benchmarks := []struct {
		name string
		req  route.Request
	}{
		{"read", route.Request{Access: route.AccessRead, Reason: route.ReasonReadOnly}},
		{"write", route.Request{Access: route.AccessWrite, Reason: route.ReasonWrite, Subject: "INSERT"}},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := route.Decide(bm.req, snap, pol, testNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecideGolden runs every golden case, errors included.
func BenchmarkDecideGolden(b *testing.B) {
	cases := loadCases(b)
	type input struct {
		req  route.Request
		snap *route.Snapshot
		pol  route.Policy
	}
	inputs := make([]input, len(cases))
	for i, c := range cases {
		inputs[i].req, inputs[i].snap, inputs[i].pol = c.inputs()
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, in := range inputs {
			_, _ = route.Decide(in.req, in.snap, in.pol, testNow)
		}
	}
}

func TestPrimary(t *testing.T) {
	snap := benchSnapshot()
	tests := []struct {
		name      string
		downAfter time.Duration
		want      int
		wantCode  route.Code
	}{
		{"fresh primary", 3 * time.Second, 0, 0},
		{"primary sample older than down-after", 10 * time.Millisecond, -1, route.NoPrimary},
		{"down-after must be positive", 0, -1, route.InvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := route.Primary(snap, route.Policy{DownAfter: tt.downAfter}, testNow)
			if got != tt.want {
				t.Errorf("index %d, want %d", got, tt.want)
			}
			var rerr *route.Error
			switch {
			case tt.wantCode == 0 && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.wantCode != 0 && (!errors.As(err, &rerr) || rerr.Code != tt.wantCode):
				t.Errorf("error %v, want code %s", err, tt.wantCode)
			}
		})
	}
}

func TestAvoidedStandbyIsTheLastResort(t *testing.T) {
	snap := benchSnapshot()
	pol := route.Policy{MaxReplicaLag: 5 * time.Second, DownAfter: 3 * time.Second}
	read := route.Request{Access: route.AccessRead, Reason: route.ReasonReadOnly}
	first, err := route.Decide(read, snap, pol, testNow)
	if err != nil {
		t.Fatal(err)
	}
	read.Avoid = 1 << uint(first.NodeIndex)
	other, err := route.Decide(read, snap, pol, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if other.Node == first.Node || other.Role != route.RoleStandby {
		t.Fatalf("avoiding %s still chose %s (%s)", first.Node, other.Node, other.Role)
	}
	// Avoiding every standby falls back to the policy's own choice, not to an error.
	read.Avoid = ^uint64(0)
	again, err := route.Decide(read, snap, pol, testNow)
	if err != nil || again.Node != first.Node {
		t.Fatalf("avoiding all standbys: %v %v, want %s", again.Node, err, first.Node)
	}
}
