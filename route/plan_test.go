package route_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgowl/pgowl/route"
)

const planCasesFile = "testdata/plan_cases.json"

// planCase is one golden case of route.Plan (or, with login set, of
// route.PlanLogin). A missing policy is defaultPlanPolicy.
type planCase struct {
	Comment string `json:"comment"`
	Login   bool   `json:"login,omitempty"`
	// Arrival: the case is of route.PlanArrival, not route.Plan.
	Arrival   bool          `json:"arrival,omitempty"`
	Policy    *casePolicy   `json:"policy,omitempty"`
	Snapshot  caseSnapshot  `json:"snapshot"`
	Statement caseStatement `json:"statement"`
	Session   caseSession   `json:"session"`
	Expected  planExpected  `json:"expected"`
}

type caseStatement struct {
	Access  route.Access `json:"access"`
	Reason  route.Reason `json:"reason"`
	Subject string       `json:"subject,omitempty"`
	Pins    route.Pins   `json:"pins,omitempty"`
	// Shape is "", "prepare_only" or "ends_no_transaction".
	Shape             string          `json:"shape,omitempty"`
	Tx                route.TxControl `json:"tx,omitempty"`
	NamesSerializable bool            `json:"names_serializable,omitempty"`
	Statements        int             `json:"statements,omitempty"`
	SessionEffects    bool            `json:"session_effects,omitempty"`
	Unparsed          bool            `json:"unparsed,omitempty"`
}

type caseSession struct {
	HeldNode string      `json:"held_node,omitempty"`
	HeldRole *route.Role `json:"held_role,omitempty"`
	// HeldOpenReadOnlyBatch and HeldRepliesPending describe the held backend.
	HeldOpenReadOnlyBatch bool `json:"held_open_read_only_batch,omitempty"`
	HeldRepliesPending    bool `json:"held_replies_pending,omitempty"`
	// DeferredOpen: the session has a deferred BEGIN whose statement the
	// case does not give (deferred_begin gives it, and opens it too).
	DeferredOpen bool `json:"deferred_open,omitempty"`
	// DeferredAborted: the deferred transaction failed (with deferred_open or deferred_begin).
	DeferredAborted    bool       `json:"deferred_aborted,omitempty"`
	TransactionPooling bool       `json:"transaction_pooling,omitempty"`
	BatchPending       bool       `json:"batch_pending,omitempty"`
	SetsIsolation      bool       `json:"sets_isolation,omitempty"`
	LeftReadOnlyBatch  bool       `json:"left_read_only_batch,omitempty"`
	Pins               route.Pins `json:"pins,omitempty"`
	DeferredBegin      *caseBegin `json:"deferred_begin,omitempty"`
	PrimaryOnly        []string   `json:"primary_only,omitempty"` // "serializable_at_login", "serializable_read_back"
	PrimaryFull        bool       `json:"primary_full,omitempty"`
	SessionMaxLagMS    int64      `json:"session_max_lag_ms,omitempty"`
	Turn               uint64     `json:"turn,omitempty"`
	Saturated          []string   `json:"saturated,omitempty"` // node names: Avoid
	Connected          []string   `json:"connected,omitempty"` // node names
	// ReadAfter is the session's write position (read your writes), on
	// ReadAfterTimeline (0: a token without one).
	ReadAfter         route.LSN            `json:"read_after,omitempty"`
	ReadAfterTimeline uint32               `json:"read_after_timeline,omitempty"`
	Replayed          map[string]route.LSN `json:"replayed,omitempty"` // learned replay positions by node
	ReadAfterWaitOver bool                 `json:"read_after_wait_over,omitempty"`
	Guard             *caseGuard           `json:"guard,omitempty"`
	// LoginRefused names the standbys that refused the session's login.
	LoginRefused []string `json:"login_refused,omitempty"`
}

// caseGuard is a guarded statement's traffic class: its busy limits and its
// statements in flight per node name.
type caseGuard struct {
	Name             string         `json:"name"`
	MaxActive        int            `json:"max_active,omitempty"`
	MaxActivePercent int            `json:"max_active_percent,omitempty"`
	MaxInFlight      int            `json:"max_in_flight,omitempty"`
	InFlight         map[string]int `json:"in_flight,omitempty"`
}

type caseBegin struct {
	ReadOnly  bool          `json:"read_only"`
	Statement caseStatement `json:"statement"`
}

type planExpected struct {
	Node                  string        `json:"node,omitempty"`
	Role                  string        `json:"role,omitempty"`
	Reason                string        `json:"reason,omitempty"`
	Subject               string        `json:"subject,omitempty"`
	LagMS                 *int64        `json:"lag_ms,omitempty"`
	FallbackRule          string        `json:"fallback_rule,omitempty"`
	OnHeld                bool          `json:"on_held,omitempty"`
	LeaveHeldBatch        bool          `json:"leave_held_batch,omitempty"`
	CarriesBegin          bool          `json:"carries_begin,omitempty"`
	Resend                string        `json:"resend,omitempty"`
	Arrival               string        `json:"arrival,omitempty"`
	Begin                 *caseDecision `json:"begin,omitempty"`
	BeginFollowsStatement bool          `json:"begin_follows_statement,omitempty"`
	ErrorCode             string        `json:"error_code,omitempty"`
	SQLState              string        `json:"sqlstate,omitempty"`
	Message               string        `json:"message,omitempty"`
	LoginOrder            []string      `json:"login_order,omitempty"`
	AwaitReplay           bool          `json:"await_replay,omitempty"`
	WaitLSN               string        `json:"wait_lsn,omitempty"`
	NodeLSN               string        `json:"node_lsn,omitempty"`
	Behind                string        `json:"behind,omitempty"`
	// LoginRefused is Decision.LoginRefused.
	LoginRefused string `json:"login_refused,omitempty"`
	// NoticeDetail is the NOTICE's DETAIL, checked for read-your-writes
	// and login-refused cases.
	NoticeDetail string `json:"notice_detail,omitempty"`
	// Notice is the NOTICE's message, checked for login-refused cases.
	Notice string `json:"notice,omitempty"`
}

type caseDecision struct {
	Node         string `json:"node"`
	Role         string `json:"role"`
	Reason       string `json:"reason"`
	Subject      string `json:"subject,omitempty"`
	FallbackRule string `json:"fallback_rule,omitempty"`
}

var defaultPlanPolicy = casePolicy{MaxReplicaLagMS: 5000, StandbyChoice: route.LeastLag, WhenNoStandby: route.Reject, DownAfterMS: 3000}

var shapes = map[string]route.Shape{"": route.ShapeExecutes, "prepare_only": route.ShapePrepareOnly, "ends_no_transaction": route.ShapeEndsNoTransaction}

var primaryOnlyNames = map[string]route.PrimaryOnly{
	"serializable_at_login":  route.SerializableAtLogin,
	"serializable_read_back": route.SerializableReadBack,
}

func (s caseStatement) statement(t *testing.T) route.Statement {
	shape, ok := shapes[s.Shape]
	if !ok {
		t.Fatalf("unknown shape %q", s.Shape)
	}
	return route.Statement{Access: s.Access, Reason: s.Reason, Subject: s.Subject, Pins: s.Pins, Shape: shape,
		Tx: s.Tx, NamesSerializable: s.NamesSerializable, Statements: s.Statements, SessionEffects: s.SessionEffects, Unparsed: s.Unparsed}
}

// nodeMask turns node names into a bit set over snap's nodes.
func nodeMask(t *testing.T, snap *route.Snapshot, names []string) uint64 {
	var mask uint64
	for _, name := range names {
		i := slicesIndex(snap, name)
		if i < 0 {
			t.Fatalf("unknown node %q", name)
		}
		mask |= 1 << uint(i)
	}
	return mask
}

func slicesIndex(snap *route.Snapshot, name string) int {
	for i := range snap.Nodes {
		if snap.Nodes[i].Name == name {
			return i
		}
	}
	return -1
}

func (c planCase) request(t *testing.T) route.PlanRequest {
	pol := defaultPlanPolicy
	if c.Policy != nil {
		pol = *c.Policy
	}
	_, snap, policy := decideCase{Policy: pol, Snapshot: c.Snapshot}.inputs()
	r := route.PlanRequest{Statement: c.Statement.statement(t), Snapshot: snap, Policy: policy, Now: testNow}
	s := &r.Session
	if c.Session.HeldNode != "" {
		s.Held = route.HeldNode{Node: c.Session.HeldNode, Role: route.RolePrimary}
		if c.Session.HeldRole != nil {
			s.Held.Role = *c.Session.HeldRole
		}
		s.Held.OpenReadOnlyBatch, s.Held.RepliesPending = c.Session.HeldOpenReadOnlyBatch, c.Session.HeldRepliesPending
	}
	s.TransactionPooling, s.BatchPending = c.Session.TransactionPooling, c.Session.BatchPending
	s.SetsIsolation, s.LeftReadOnlyBatch = c.Session.SetsIsolation, c.Session.LeftReadOnlyBatch
	s.Pins = c.Session.Pins
	if b := c.Session.DeferredBegin; b != nil {
		s.Deferred = route.DeferredBegin{Open: true, ReadOnly: b.ReadOnly, Begin: b.Statement.statement(t)}
	}
	s.Deferred.Open = s.Deferred.Open || c.Session.DeferredOpen
	s.Deferred.Aborted = c.Session.DeferredAborted
	for _, name := range c.Session.PrimaryOnly {
		p, ok := primaryOnlyNames[name]
		if !ok {
			t.Fatalf("unknown primary_only %q", name)
		}
		s.PrimaryOnly |= p
	}
	s.PrimaryFull = c.Session.PrimaryFull
	s.MaxLag = ms(c.Session.SessionMaxLagMS)
	s.Turn = c.Session.Turn
	s.Avoid = nodeMask(t, snap, c.Session.Saturated)
	s.Connected = nodeMask(t, snap, c.Session.Connected)
	if g := c.Session.Guard; g != nil {
		s.Guard = route.Guard{Name: g.Name, MaxActive: g.MaxActive, MaxActivePercent: g.MaxActivePercent, MaxInFlight: g.MaxInFlight,
			InFlight: make([]int, len(snap.Nodes))}
		for name, n := range g.InFlight {
			i := slicesIndex(snap, name)
			if i < 0 {
				t.Fatalf("unknown node %q", name)
			}
			s.Guard.InFlight[i] = n
		}
	}
	s.ReadAfter = route.WritePosition{LSN: c.Session.ReadAfter, Timeline: c.Session.ReadAfterTimeline}
	for _, n := range snap.Nodes {
		if lsn, ok := c.Session.Replayed[n.Name]; ok {
			s.Replayed = append(s.Replayed, route.NodeReplay{Node: n.Name, LSN: lsn})
		}
	}
	s.ReadAfterWaitOver = c.Session.ReadAfterWaitOver
	s.LoginRefused = nodeMask(t, snap, c.Session.LoginRefused)
	return r
}

func loadPlanCases(t *testing.T) []planCase { return loadGolden[planCase](t, planCasesFile) }

// planOutcome turns Plan's result into the golden form.
func planOutcome(out route.Outcome, err error) planExpected {
	var got planExpected
	if err != nil {
		var rerr *route.Error
		if !errors.As(err, &rerr) {
			return planExpected{ErrorCode: "NOT_A_ROUTE_ERROR: " + err.Error()}
		}
		got = planExpected{ErrorCode: rerr.Code.String(), SQLState: rerr.SQLState, Message: rerr.Message}
		if out.Decision.Node != "" {
			// A lost held node: the decision it would have had, for the log.
			got.Node, got.Reason, got.Subject = out.Decision.Node, out.Decision.Reason.String(), out.Decision.Subject
		}
		got.OnHeld = out.OnHeld
		return got
	}
	d := out.Decision
	lag := d.Lag.Milliseconds()
	got = planExpected{
		Node:                  d.Node,
		Role:                  d.Role.String(),
		Reason:                d.Reason.String(),
		Subject:               d.Subject,
		LagMS:                 &lag,
		FallbackRule:          d.FallbackRule,
		OnHeld:                out.OnHeld,
		LeaveHeldBatch:        out.LeaveHeldBatch,
		CarriesBegin:          out.CarriesBegin,
		Resend:                out.Resend.String(),
		BeginFollowsStatement: out.BeginFollowsStatement,
	}
	if out.LeaveHeldBatch {
		// The proxy plans again once it left: no decision yet.
		return planExpected{LeaveHeldBatch: true, Resend: out.Resend.String()}
	}
	if out.Begin.Node != "" {
		b := out.Begin
		got.Begin = &caseDecision{Node: b.Node, Role: b.Role.String(), Reason: b.Reason.String(), Subject: b.Subject, FallbackRule: b.FallbackRule}
	}
	got.AwaitReplay = out.AwaitReplay
	if d.ReadAfter != 0 {
		got.WaitLSN = d.ReadAfter.String()
		if d.NodeReplay != 0 {
			got.NodeLSN = d.NodeReplay.String()
		}
		got.Behind = d.Behind
		got.NoticeDetail = d.NoticeDetail()
	}
	if d.LoginRefused != "" {
		got.LoginRefused = d.LoginRefused
		got.NoticeDetail = d.NoticeDetail()
		got.Notice = d.NoticeMessage(0)
	}
	return got
}

func loginOutcome(snap *route.Snapshot, order []int, err error) planExpected {
	if err != nil {
		var rerr *route.Error
		if !errors.As(err, &rerr) {
			return planExpected{ErrorCode: "NOT_A_ROUTE_ERROR: " + err.Error()}
		}
		return planExpected{ErrorCode: rerr.Code.String(), SQLState: rerr.SQLState, Message: rerr.Message}
	}
	names := []string{}
	for _, i := range order {
		names = append(names, snap.Nodes[i].Name)
	}
	return planExpected{LoginOrder: names}
}

// TestPlanGolden replays testdata/plan_cases.json: each case is a statement,
// the session's facts, a snapshot and a policy, and the plan expected for
// them. On a mismatch the actual results are written beside the file.
func TestPlanGolden(t *testing.T) {
	cases := loadPlanCases(t)
	actual := make([]planCase, len(cases))
	failed := false
	for i, c := range cases {
		r := c.request(t)
		var got planExpected
		switch {
		case c.Login:
			order, err := route.PlanLogin(r.Snapshot)
			got = loginOutcome(r.Snapshot, order, err)
		case c.Arrival:
			got = planExpected{Arrival: route.PlanArrival(r.Statement, r.Session).String()}
		default:
			got = planOutcome(route.Plan(r))
		}
		actual[i] = c
		actual[i].Expected = got
		if !reflect.DeepEqual(got, c.Expected) {
			failed = true
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(c.Expected)
			t.Errorf("case %d %q:\n got %s\nwant %s", i, c.Comment, gotJSON, wantJSON)
		}
	}
	actualPath := filepath.Join("testdata", "plan_cases.actual.json")
	if failed {
		out, err := json.MarshalIndent(actual, "", "  ")
		if err != nil {
			t.Fatalf("marshal actual cases: %v", err)
		}
		if err := os.WriteFile(actualPath, append(out, '\n'), 0o644); err != nil {
			t.Fatalf("write %s: %v", actualPath, err)
		}
		t.Fatalf("golden mismatch: actual results written to %s; if the change is intended, copy it over %s", actualPath, planCasesFile)
	}
	_ = os.Remove(actualPath)
}

// TestPlanGoldenCoverage checks that the table covers every reason of the
// README's reason table, every kind of pin, every refusal and every session
// fact, so that a case removed by mistake is noticed.
func TestPlanGoldenCoverage(t *testing.T) {
	cases := loadPlanCases(t)
	reasons := map[string]bool{}
	codes := map[string]bool{}
	var heldPins, statementPins route.Pins
	facts := map[string]bool{}
	outputs := map[string]bool{}
	for _, c := range cases {
		reasons[c.Expected.Reason] = true
		if c.Expected.Begin != nil {
			reasons[c.Expected.Begin.Reason] = true
			facts["deferred begin"] = true
		}
		codes[c.Expected.ErrorCode] = true
		heldPins |= c.Session.Pins
		statementPins |= c.Statement.Pins
		if c.Statement.Shape != "" {
			facts[c.Statement.Shape] = true
		}
		if len(c.Session.Saturated) > 0 {
			facts["avoid"] = true
		}
		if len(c.Session.PrimaryOnly) > 0 {
			facts["primary only"] = true
		}
		if c.Session.PrimaryFull {
			facts["primary full"] = true
		}
		if c.Session.HeldNode != "" {
			facts["held"] = true
		}
		if c.Login {
			facts["login"] = true
		}
		if c.Arrival {
			outputs["arrival "+c.Expected.Arrival] = true
		}
		if c.Expected.LeaveHeldBatch {
			outputs["leave held batch"] = true
		}
		if c.Expected.CarriesBegin {
			outputs["carries begin"] = true
		}
		if c.Session.DeferredBegin != nil && !c.Expected.CarriesBegin && c.Expected.ErrorCode == "" {
			outputs["deferred begin not carried"] = true
		}
		if c.Expected.Resend != "" {
			outputs["resend "+c.Expected.Resend] = true
		}
		for name, set := range map[string]bool{
			"transaction pooling": c.Session.TransactionPooling, "batch pending": c.Session.BatchPending,
			"deferred open": c.Session.DeferredOpen, "sets isolation": c.Session.SetsIsolation,
			"left read-only batch": c.Session.LeftReadOnlyBatch, "held open read-only batch": c.Session.HeldOpenReadOnlyBatch,
			"held replies pending": c.Session.HeldRepliesPending, "names serializable": c.Statement.NamesSerializable,
			"session effects": c.Statement.SessionEffects, "unparsed": c.Statement.Unparsed,
			"deferred aborted":   c.Session.DeferredAborted,
			"several statements": c.Statement.Statements > 1, "tx " + c.Statement.Tx.String(): c.Statement.Tx != route.TxNone,
		} {
			if set {
				facts[name] = true
			}
		}
		if c.Session.Guard != nil {
			facts["guard"] = true
		}
		if c.Session.ReadAfter != 0 {
			facts["read after"] = true
		}
		if len(c.Session.LoginRefused) > 0 {
			facts["login refused"] = true
			switch {
			case c.Expected.LoginRefused != "":
				outputs["login refused: fallback to the primary"] = true
			case c.Expected.ErrorCode == "NO_READABLE_REPLICA":
				outputs["login refused: no readable replica"] = true
			case c.Expected.Role == "standby":
				outputs["login refused: another standby"] = true
			case c.Statement.Access == route.AccessWrite && c.Expected.Role == "primary":
				outputs["login refused: a write stays on the primary"] = true
			}
		}
		if strings.Contains(strings.ToUpper(c.Statement.Subject), "LOAD") && c.Session.Pins != 0 {
			facts["LOAD while pinned"] = true
		}
	}
	for _, r := range []string{"READ_ONLY", "WRITE", "ROW_LOCK", "WRITING_FUNCTION", "UNKNOWN_EFFECT", "NODE_LOCAL_STATS",
		"NESTING_TOO_DEEP", "HINT", "OVERRIDE", "IN_TRANSACTION", "SESSION_PINNED", "FALLBACK_PRIMARY", "NO_STANDBY_CONFIGURED", "READ_YOUR_WRITES"} {
		if !reasons[r] {
			t.Errorf("no case ends with reason %s", r)
		}
	}
	for _, code := range []string{"NO_READABLE_REPLICA", "REPLICA_LAG_EXCEEDED", "NO_PRIMARY", "PRIMARY_REPLACED", "DATABASE_BUSY"} {
		if !codes[code] {
			t.Errorf("no case refuses with %s", code)
		}
	}
	all := route.PinListen | route.PinTempTable | route.PinHoldCursor | route.PinAdvisoryLock | route.PinSetRole |
		route.PinSQLPrepare | route.PinSerializableDefault
	if heldPins != all {
		t.Errorf("held pins covered: %v, want every kind", heldPins)
	}
	if statementPins != all {
		t.Errorf("pins taken by a statement covered: %v, want every kind", statementPins)
	}
	for _, f := range []string{"deferred begin", "prepare_only", "ends_no_transaction", "avoid", "primary only", "held", "login", "LOAD while pinned", "guard", "read after",
		"transaction pooling", "batch pending", "deferred open", "sets isolation", "left read-only batch",
		"held open read-only batch", "held replies pending", "names serializable", "session effects", "unparsed", "login refused",
		"several statements", "tx begin", "tx begin_read_only", "tx commit", "tx rollback", "deferred aborted"} {
		if !facts[f] {
			t.Errorf("no case with %s", f)
		}
	}
	for _, o := range []string{"arrival defer_begin", "arrival route", "arrival commit_deferred", "arrival rollback_deferred",
		"arrival refuse_aborted", "leave held batch", "carries begin", "deferred begin not carried",
		"resend never", "resend if_not_run", "resend prepare_only", "resend read",
		"login refused: fallback to the primary", "login refused: no readable replica", "login refused: another standby",
		"login refused: a write stays on the primary"} {
		if !outputs[o] {
			t.Errorf("no case whose outcome is %s", o)
		}
	}
}

// TestPlanAgreesWithDecide checks that without session facts a plan is
// Decide's decision for the statement's request.
func TestPlanAgreesWithDecide(t *testing.T) {
	for _, c := range loadCases(t) {
		req, snap, pol := c.inputs()
		out, err := route.Plan(route.PlanRequest{
			Statement: route.Statement{Access: req.Access, Reason: req.Reason, Subject: req.Subject},
			Session:   route.SessionFacts{MaxLag: req.SessionMaxLag, Turn: req.Turn},
			Snapshot:  snap, Policy: pol, Now: testNow,
		})
		d, derr := route.Decide(req, snap, pol, testNow)
		if (err == nil) != (derr == nil) || out.Decision != d {
			t.Errorf("%q: Plan gave %+v, %v; Decide gave %+v, %v", c.Comment, out.Decision, err, d, derr)
		}
	}
}

func TestPinsJSONRefusesUnknownNames(t *testing.T) {
	var p route.Pins
	if err := json.Unmarshal([]byte(`["LISTEN","NOT_A_PIN"]`), &p); err == nil {
		t.Fatalf("unknown pin name accepted: %v", p)
	}
	if err := json.Unmarshal([]byte(`["LISTEN","SQL_PREPARE"]`), &p); err != nil || p != route.PinListen|route.PinSQLPrepare {
		t.Fatalf("got %v, %v", p, err)
	}
}
