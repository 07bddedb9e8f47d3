package route

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Pins is a set of the kinds of session state that tie a session to the node
// that holds it: once taken, every statement of the session runs there.
type Pins uint16

const (
	// PinListen: the session LISTENs on a channel.
	PinListen Pins = 1 << iota
	// PinTempTable: the session made an object in its temporary schema (pg_temp): a table,
	// view, sequence, function or type. Its name keeps the kind that is most often the cause.
	PinTempTable
	// PinHoldCursor: the session has a cursor WITH HOLD open.
	PinHoldCursor
	// PinAdvisoryLock: the session holds a session-level advisory lock.
	PinAdvisoryLock
	// PinSetRole: SET ROLE or SET SESSION AUTHORIZATION is in force.
	PinSetRole
	// PinSQLPrepare: the session has an SQL PREPAREd statement.
	PinSQLPrepare
	// PinSerializableDefault: the session made serializable its default isolation level.
	PinSerializableDefault
)

var pinNames = [...]struct {
	pin         Pins
	name, words string
}{
	{PinListen, "LISTEN", "LISTEN"},
	{PinTempTable, "TEMP_TABLE", "a temporary object"},
	{PinHoldCursor, "HOLD_CURSOR", "a cursor WITH HOLD"},
	{PinAdvisoryLock, "ADVISORY_LOCK", "a session-level advisory lock"},
	{PinSetRole, "SET_ROLE", "SET ROLE / SET SESSION AUTHORIZATION"},
	{PinSQLPrepare, "SQL_PREPARE", "an SQL PREPARE"},
	{PinSerializableDefault, "SERIALIZABLE_DEFAULT", "a serializable default isolation level"},
}

// String describes the pins in words, for notices and logs:
// "LISTEN, a temporary object".
func (p Pins) String() string {
	var parts []string
	for _, n := range pinNames {
		if p&n.pin != 0 {
			parts = append(parts, n.words)
		}
	}
	return strings.Join(parts, ", ")
}

// MarshalJSON encodes the set as a list of names, such as ["LISTEN","TEMP_TABLE"].
func (p Pins) MarshalJSON() ([]byte, error) {
	names := []string{}
	for _, n := range pinNames {
		if p&n.pin != 0 {
			names = append(names, n.name)
		}
	}
	return json.Marshal(names)
}

// UnmarshalJSON decodes a list of names; an unknown name is an error.
func (p *Pins) UnmarshalJSON(data []byte) error {
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return err
	}
	*p = 0
next:
	for _, name := range names {
		for _, n := range pinNames {
			if n.name == name {
				*p |= n.pin
				continue next
			}
		}
		return fmt.Errorf("route: unknown pin %q", name)
	}
	return nil
}

// Shape says what kind of unit a statement is, where that changes its route.
type Shape uint8

const (
	// ShapeExecutes is a unit that runs statements.
	ShapeExecutes Shape = iota
	// ShapePrepareOnly is a synced extended-protocol batch outside a
	// transaction that only parses, describes and closes: nothing executes.
	// A read's may run on any node (the primary when no standby qualifies);
	// a write's goes to the primary, where the statement will run (a standby
	// may not yet have replayed what the statement names, a table or
	// function the session just created, and its parse would fail there),
	// unless the primary cannot take it at once (SessionFacts.PrimaryFull,
	// or no primary available): then where a read's would.
	ShapePrepareOnly
	// ShapeEndsNoTransaction is a lone COMMIT or ROLLBACK while the session
	// has no transaction anywhere: any node answers it alike.
	ShapeEndsNoTransaction
)

// Statement is what the classifier found in a unit (one simple Query or one
// extended batch), in the router's terms.
type Statement struct {
	// Access says whether the statement needs the primary.
	Access Access
	// Reason is the classifier's effect reason (see Request.Reason).
	Reason Reason
	// Subject names what decided the effect, for the notice.
	Subject string
	// Pins are the kinds of pinning state the statement takes.
	Pins Pins
	// Shape marks units that execute nothing or end no transaction.
	Shape Shape
	// Tx says whether the unit is a BEGIN (PlanArrival).
	Tx TxControl
	// NamesSerializable: with Tx, an isolation option of the BEGIN names
	// SERIALIZABLE, or a level that may be it.
	NamesSerializable bool
	// Statements is how many statements the unit has.
	Statements int
	// SessionEffects: the unit changes session state of any kind (a
	// setting, a pin, a DISCARD, ...), not only pinning state.
	SessionEffects bool
	// Unparsed: the classifier could not parse the unit.
	Unparsed bool
}

// Request is the statement's request to Decide on its own, without session
// facts: a statement that takes pinning state needs a node that can run
// whatever the session does next, the primary.
func (s Statement) Request() Request {
	if s.Shape == ShapePrepareOnly {
		switch {
		case s.Pins != 0:
			// Nothing pins yet: the statement will, where it runs.
			return Request{Access: AccessWrite, Reason: ReasonSessionPinned, Subject: "prepare only, where it runs: " + s.Pins.String() + " will pin the session"}
		case s.Access == AccessWrite:
			return Request{Access: AccessWrite, Reason: s.Reason, Subject: "prepare only, where it runs: " + s.Subject}
		}
		return Request{Access: AccessRead, Reason: ReasonReadOnly, Subject: "prepare only: nothing executes"}
	}
	if s.Pins != 0 {
		return Request{Access: AccessWrite, Reason: ReasonSessionPinned, Subject: s.Pins.String() + " pins the session"}
	}
	return Request{Access: s.Access, Reason: s.Reason, Subject: s.Subject}
}

// HeldNode is the session's backend that it must stay on: an open
// transaction block, an extended batch not yet ended by Sync, or a pin.
type HeldNode struct {
	// Node is the node's name; "" when the session holds no backend.
	Node string
	// Role is the role the node had when the backend was taken.
	Role Role
	// OpenReadOnlyBatch: the session is on the node for an extended batch
	// sent at a Flush whose every part since the last Sync only read,
	// outside a transaction block, without an error.
	OpenReadOnlyBatch bool
	// RepliesPending: replies of units already sent are still to be read.
	RepliesPending bool
}

// DeferredBegin is a BEGIN the proxy answered itself (PlanArrival) and
// sends ahead of the transaction's first unit: the node is chosen for the
// transaction as well as for the statement (Outcome.CarriesBegin).
type DeferredBegin struct {
	// Open: the session has a deferred BEGIN; the other fields are then
	// meaningful.
	Open bool
	// Aborted: the transaction's first statement could not be routed (or
	// was refused): the transaction is failed, on no node.
	Aborted bool
	// ReadOnly is true for BEGIN READ ONLY (or START TRANSACTION READ ONLY).
	ReadOnly bool
	// Begin is the BEGIN statement's own classification.
	Begin Statement
}

// PrimaryOnly is a set of session settings that make every statement of the
// session need the primary, whatever it does.
type PrimaryOnly uint8

const (
	// SerializableAtLogin: the login made serializable the default isolation
	// level (startup parameter, role or database setting); a standby
	// refuses every statement then.
	SerializableAtLogin PrimaryOnly = 1 << iota
	// SerializableReadBack: the session's settings, read back from its node,
	// make serializable the default isolation level.
	SerializableReadBack
)

// subject is the notice subject for the first reason in the set.
func (p PrimaryOnly) subject() string {
	switch {
	case p&SerializableAtLogin != 0:
		return "a serializable default isolation level (startup parameter, role or database setting)"
	case p&SerializableReadBack != 0:
		return "a serializable default isolation level (read back from the node)"
	}
	return ""
}

// SessionFacts is what the session knows that changes where its next unit runs.
type SessionFacts struct {
	// Held is the backend the session must stay on; Held.Node is "" when none.
	Held HeldNode
	// TransactionPooling: backends go back to the pool between
	// transactions, so a BEGIN may wait for its first statement (PlanArrival).
	TransactionPooling bool
	// BatchPending: extended-protocol messages wait to be sent ahead of the unit.
	BatchPending bool
	// SetsIsolation: the session set a default isolation level (SET
	// default_transaction_isolation, SET SESSION CHARACTERISTICS). It is
	// read only with Held.OpenReadOnlyBatch, and the proxy may leave it
	// unset otherwise.
	SetsIsolation bool
	// LeftReadOnlyBatch: the unit arrived while the session was held on a
	// read-only batch's standby, which it left (Outcome.LeaveHeldBatch).
	LeftReadOnlyBatch bool
	// Pins are the pinning state the session holds on Held.Node.
	Pins Pins
	// Deferred is the session's deferred BEGIN, if it has one.
	Deferred DeferredBegin
	// PrimaryOnly lists settings that send every statement to the primary.
	PrimaryOnly PrimaryOnly
	// PrimaryFull: no backend to the primary is free now. A unit that only
	// prepares a write then goes where a read's prepare would rather than
	// wait: a client that prepares synchronously (libpq's PQprepare, as
	// pgbench -M prepared sends it) may hold every primary backend in open
	// transactions on its other connections, which wait for the prepare.
	PrimaryFull bool
	// MaxLag is the session's own lag limit (pgowl.max_replica_lag); 0: none.
	MaxLag time.Duration
	// Turn is the session's read counter, for round robin.
	Turn uint64
	// Avoid marks standbys whose connection pool is exhausted (bit i is
	// Snapshot.Nodes[i]): a read chosen there moves to another qualifying
	// standby with room, if there is one.
	Avoid uint64
	// Connected marks nodes the session has a backend on already; a read
	// chosen there needs no pool room and stays.
	Connected uint64
	// Guard is the traffic class of a guarded statement, with its busy
	// limits; the zero Guard is business traffic (see keepOffBusyNodes).
	Guard Guard
	// ReadAfter is the WAL position the session's reads must see: its own
	// last write, its user's (read_your_writes: user), or a token (SET
	// pgowl.read_after). A read goes only to a standby known to have
	// replayed it; zero: the session has nothing to wait for.
	ReadAfter WritePosition
	// ReadAfterChange is set when ReadAfter is the position of a change of
	// a definition the read's verdict rests on (a function, view or type
	// that some session changed), later than the session's own position:
	// the NOTICE and the refusal say so. ReadAfterChanged names what
	// changed ("" when the change could name nothing).
	ReadAfterChange  bool
	ReadAfterChanged string
	// Replayed are standbys' replay positions the proxy learned by asking
	// them, fresher than the snapshot's samples.
	Replayed []NodeReplay
	// ReadAfterWaitOver: routing.read_your_writes_wait has passed without a
	// standby seen to replay ReadAfter; the read goes to the primary
	// (READ_YOUR_WRITES) or is refused (Policy.ReadYourWritesReject).
	ReadAfterWaitOver bool
	// LoginRefused marks standbys that refused the session's login just now
	// (bit i is Snapshot.Nodes[i]): the role or database is not replayed
	// there yet (28P01, 28000, 3D000), or the node does not accept
	// connections (57P03). A read never goes there; when they were the only
	// qualifying standbys, the read follows Policy.WhenNoStandby, and the
	// decision or the refusal names them.
	LoginRefused uint64
}

// PlanRequest is everything a routing plan depends on.
type PlanRequest struct {
	Statement Statement
	Session   SessionFacts
	Snapshot  *Snapshot
	Policy    Policy
	Now       time.Time
}

// Outcome is a plan: where the unit runs, and how its notices tell it.
type Outcome struct {
	// Decision is where the unit runs and why. On a refusal it is the zero
	// Decision, or for a lost held node the decision it would have had.
	Decision Decision
	// OnHeld is true when the unit runs on the session's held backend.
	OnHeld bool
	// Request is what was decided (after session facts), when not OnHeld:
	// the proxy waits for a primary only for a write.
	Request Request
	// CarriesBegin: the session's deferred BEGIN is sent ahead of the unit,
	// on the node planned for both. It is set before any refusal: a unit
	// that carries it and finds no node aborts the deferred transaction.
	CarriesBegin bool
	// Begin is the deferred BEGIN's decision as its notice and log tell it,
	// with CarriesBegin.
	Begin Decision
	// BeginFollowsStatement: a READ ONLY transaction went where its first
	// statement had to run (the primary), not where BEGIN READ ONLY alone
	// would have gone; the statement keeps its own reason.
	BeginFollowsStatement bool
	// LeaveHeldBatch: the unit needs the primary, and the held backend's
	// open batch only read on a standby: end the batch's implicit
	// transaction there (a Sync whose reply the client does not see), give
	// the backend back, and plan again without it, with
	// Session.LeftReadOnlyBatch. Decision is unset.
	LeaveHeldBatch bool
	// Resend says when the unit may be sent again on a fresh connection if
	// its backend fails before any reply reaches the client.
	Resend Resend
	// AwaitReplay: the read must see Session.ReadAfter and no qualifying
	// standby is known to have replayed it. Decision is the standby to ask
	// (pg_last_wal_replay_lsn()); plan again with its answer in
	// Session.Replayed, or with Session.ReadAfterWaitOver once the wait is over.
	AwaitReplay bool
}

// Plan decides where a unit runs, given its statement, the session's facts,
// the node snapshot, the policy and the time. The package documentation
// states the rules; on failure the error is an *Error.
func Plan(r PlanRequest) (Outcome, error) {
	snap, s := r.Snapshot, &r.Session
	if snap == nil {
		snap = &Snapshot{}
	}
	if s.Held.Node != "" {
		return planHeld(r.Statement, s, snap, r.Policy, r.Now)
	}
	st := r.Statement
	out := Outcome{Resend: resendRule(st, s), CarriesBegin: carriesBegin(st, &s.Deferred)}
	if d := &s.Deferred; out.CarriesBegin {
		begin := d.Begin
		switch {
		case d.ReadOnly && st.Access == AccessWrite:
			out.BeginFollowsStatement = true
			st.Pins |= begin.Pins
		case d.ReadOnly || (begin.Access == AccessWrite && st.Access == AccessRead):
			st.Access, st.Reason, st.Subject = begin.Access, begin.Reason, begin.Subject
			st.Pins |= begin.Pins
		}
	}
	if r.preparesWriteWithoutPrimary() {
		st.Access = AccessRead
	}
	req := st.Request()
	if req.Access == AccessRead && s.PrimaryOnly != 0 {
		req.Access, req.Reason, req.Subject = AccessWrite, ReasonSessionPinned, s.PrimaryOnly.subject()
	}
	req.SessionMaxLag = s.MaxLag
	req.Turn = s.Turn
	if req.Access == AccessRead {
		req.Exclude |= s.LoginRefused
	}
	out.Request = req
	pol := r.Policy
	if st.Shape != ShapeExecutes {
		// Nothing executes, or nothing needs a transaction: when no standby
		// qualifies, the primary can serve it.
		pol.WhenNoStandby = UsePrimary
	}
	dec, err := Decide(req, snap, pol, r.Now)
	if req.Access == AccessRead && req.Exclude != 0 {
		// The standbys that refused the login may be why none qualified.
		if dec, err = blameRefusedLogins(req, snap, pol, r.Now, dec, err); err != nil {
			return out, err
		}
	}
	if err != nil {
		return out, err
	}
	// A guarded statement stays off nodes over its busy limits first, so that
	// the standby the read-your-writes rule and the spreading pick is one the
	// guard allows.
	var busy uint64
	if s.Guard.limited() {
		if dec, err = keepOffBusyNodes(req, snap, pol, r.Now, &s.Guard, dec); err != nil {
			return out, err
		}
		busy = s.Guard.busyNodes(snap)
		req.Avoid |= busy
	}
	if dec.Role == RoleStandby && s.ReadAfter.LSN != 0 {
		// The read must see the session's last write (readafter.go).
		if dec, out.AwaitReplay, err = planReadAfter(&req, s, snap, pol, r.Now, dec); err != nil {
			return out, err
		}
	}
	if dec.Role == RoleStandby && !out.AwaitReplay && !skipped(s.Connected, dec.NodeIndex) {
		dec = spreadReads(req, snap, pol, r.Now, s.Avoid|busy, dec)
		if dec.ReadAfter != 0 {
			dec.NodeReplay = replayedAt(snap, dec.NodeIndex, s.Replayed)
		}
	}
	if !out.AwaitReplay && skipped(busy, dec.NodeIndex) {
		// Only busy standbys have the session's last write, or the read
		// falls back to a primary that is busy for the guard
		// (READ_YOUR_WRITES after the wait).
		return out, busyError(snap, r.Now, &s.Guard, dec)
	}
	if out.CarriesBegin {
		out.Begin = dec
		switch {
		case out.BeginFollowsStatement:
			out.Begin.Subject = "the transaction's first statement: " + dec.Subject
		case dec.FallbackRule == "" && dec.Reason != ReasonReadYourWrites:
			breq := s.Deferred.Begin.Request()
			out.Begin.Reason, out.Begin.Subject = breq.Reason, breq.Subject
		}
		if !out.BeginFollowsStatement {
			// The statement runs inside the transaction, like every one after it.
			dec.Reason, dec.Subject, dec.FallbackRule = ReasonInTransaction, r.Statement.Subject, ""
		}
	}
	out.Decision = dec
	return out, nil
}

// blameRefusedLogins names the standbys in req.Exclude that refused the
// session's login when, without them, no standby qualified for the read
// (Decide fell back to the primary or refused it) although one of them
// would have: the fallback's notice says so, and a refusal is
// NO_READABLE_REPLICA saying so. Otherwise dec and err stand.
func blameRefusedLogins(req Request, snap *Snapshot, pol Policy, now time.Time, dec Decision, err error) (Decision, error) {
	if err == nil && dec.Reason != ReasonFallbackPrimary {
		return dec, nil
	}
	var rerr *Error
	if err != nil && (!errors.As(err, &rerr) || (rerr.Code != NoReadableReplica && rerr.Code != ReplicaLagExceeded)) {
		return dec, err
	}
	maxLag := EffectiveMaxLag(pol, req)
	var refused []string
	for i := range snap.Nodes {
		if _, ok := qualifyingLag(&snap.Nodes[i], pol, now, maxLag); ok && skipped(req.Exclude, i) {
			refused = append(refused, snap.Nodes[i].Name)
		}
	}
	if len(refused) == 0 {
		return dec, err
	}
	names := strings.Join(refused, ",")
	if err == nil {
		dec.FallbackRule, dec.LoginRefused = codeNames[NoReadableReplica], names
		return dec, nil
	}
	what := "no standby can take this session's login now (" + strings.Join(refused, ", ") + " refused it: the role or database may not be replayed there yet, or the node is not accepting connections)"
	if pol.WhenNoStandby == UsePrimary {
		what += ", and no primary is available to fall back to"
	}
	return Decision{}, NewError(NoReadableReplica, what, nodeDetail(snap, now, func(i int, n *NodeState) string {
		if skipped(req.Exclude, i) && n.Role == RoleStandby {
			return "refused the session's login"
		}
		return ""
	}))
}

// spreadReads moves a read off a standby whose pool is exhausted to another
// qualifying standby that has room, so that reads do not queue on one node
// while another sits idle. Without such a standby the first choice stands.
func spreadReads(req Request, snap *Snapshot, pol Policy, now time.Time, saturated uint64, dec Decision) Decision {
	for tries := 0; tries < len(snap.Nodes) && dec.NodeIndex >= 0 && dec.NodeIndex < 64 && skipped(saturated, dec.NodeIndex); tries++ {
		req.Avoid |= 1 << uint(dec.NodeIndex)
		next, err := Decide(req, snap, pol, now)
		if err != nil || next.Role != RoleStandby || skipped(req.Avoid, next.NodeIndex) {
			break
		}
		next.ReadAfter = dec.ReadAfter
		dec = next
	}
	return dec
}

// planHeld keeps a unit on the session's held backend, unless that backend
// was taken on the primary and the node is no longer the primary.
func planHeld(st Statement, s *SessionFacts, snap *Snapshot, pol Policy, now time.Time) (Outcome, error) {
	held := s.Held
	if leavesHeldBatch(st, s) {
		return Outcome{LeaveHeldBatch: true}, nil
	}
	dec := Decision{Node: held.Node, Role: held.Role, Reason: ReasonInTransaction, Subject: st.Subject, NodeIndex: -1}
	what := "the transaction"
	if s.Pins != 0 {
		dec.Reason = ReasonSessionPinned
		dec.Subject = s.Pins.String()
		what = "what pinned the session (" + dec.Subject + ")"
	}
	out := Outcome{OnHeld: true}
	if why := HeldReplaced(snap, pol, now, held); why != "" {
		// What the session holds there would be written to a node that is
		// no longer the primary: lost at best, split brain at worst.
		out.Decision = dec
		return out, &Error{Code: PrimaryReplaced, SQLState: PrimaryReplaced.SQLState(),
			Message: "pgowl: " + held.Node + " is no longer the primary (" + why + "); " + what + " on " + held.Node + " is gone",
			Hint:    codeHint(PrimaryReplaced)}
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if n.Name != held.Node {
			continue
		}
		dec.NodeIndex = i
		dec.LagBytes, dec.LagKnown = n.LagBytes, n.LagKnown
		if n.Role != RoleUnknown {
			dec.Role = n.Role // a standby promoted under a read-only transaction is the primary now
		}
		if n.Role == RoleStandby && n.LagKnown {
			// As for a fresh decision: measured lag plus the sample's age.
			dec.Lag = n.Lag + now.Sub(n.SampledAt)
		}
	}
	out.Decision = dec
	return out, nil
}

// HeldReplaced says why held's node is no longer the primary when the
// backend was taken on the primary and the snapshot shows another node as
// the primary (a promotion, whether the old primary still answers or not),
// or held's node in recovery. It returns "" without such evidence: a node
// the monitor cannot reach, or two primaries on one timeline, leave the
// session where it is (its connection fails by itself if the node is gone).
// The proxy also watches an idle listening session's node with it.
func HeldReplaced(snap *Snapshot, pol Policy, now time.Time, held HeldNode) string {
	if held.Role != RolePrimary {
		return ""
	}
	if i, err := Primary(snap, pol, now); err == nil && snap.Nodes[i].Name != held.Node {
		return snap.Nodes[i].Name + " is the primary now"
	}
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Name == held.Node && n.Up && n.Role == RoleStandby {
			return held.Node + " is in recovery now"
		}
	}
	return ""
}

// PlanLogin orders the nodes a new session may log in to: the up primaries
// first, then every other up node, as indexes into snap.Nodes. Without an up
// node it fails with NO_PRIMARY.
func PlanLogin(snap *Snapshot) ([]int, error) {
	if snap == nil {
		snap = &Snapshot{}
	}
	var order []int
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Up && n.Role == RolePrimary {
			order = append(order, i)
		}
	}
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Up && n.Role != RolePrimary {
			order = append(order, i)
		}
	}
	if len(order) == 0 {
		return nil, &Error{Code: NoPrimary, SQLState: NoPrimary.SQLState(),
			Message: "pgowl: no node is up to log in to", Hint: "This condition is transient: retry shortly."}
	}
	return order, nil
}
