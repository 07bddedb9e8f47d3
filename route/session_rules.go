package route

import "errors"

// This file holds the plan's rules about the session rather than the node:
// whether a simple Query needs a node yet (PlanArrival: a BEGIN deferred, a
// deferred transaction ended or refused), whether a unit carries the
// deferred BEGIN (Outcome.CarriesBegin), whether a read-only batch
// may leave its standby (Plan's Outcome.LeaveHeldBatch), and whether a unit
// whose backend failed may be sent again (Outcome.Resend). Each is decided
// from typed facts alone; the proxy does the I/O each one asks for.

// TxControl is the transaction control a unit is, where it changes the plan.
type TxControl uint8

const (
	// TxNone: the unit is no BEGIN.
	TxNone TxControl = iota
	// TxBegin: a read-write BEGIN or START TRANSACTION.
	TxBegin
	// TxBeginReadOnly: BEGIN or START TRANSACTION READ ONLY.
	TxBeginReadOnly
	// TxCommit: COMMIT or END (not AND CHAIN).
	TxCommit
	// TxRollback: ROLLBACK or ABORT (not AND CHAIN, not TO SAVEPOINT).
	TxRollback
)

var txControlNames = [...]string{TxNone: "none", TxBegin: "begin", TxBeginReadOnly: "begin_read_only", TxCommit: "commit", TxRollback: "rollback"}

// String returns "none", "begin", "begin_read_only", "commit" or "rollback".
func (t TxControl) String() string {
	return enumName(txControlNames[:], uint8(t), "transaction control")
}

// MarshalText encodes the transaction control as its String form.
func (t TxControl) MarshalText() ([]byte, error) {
	return enumMarshal(txControlNames[:], uint8(t), "transaction control")
}

// UnmarshalText decodes a transaction control from its String form.
func (t *TxControl) UnmarshalText(text []byte) error {
	return enumUnmarshal(txControlNames[:], (*uint8)(t), text, "transaction control")
}

// Arrival is what the plan says of a simple Query as it arrives, before a
// node is looked for.
type Arrival uint8

const (
	// ArriveRoute: the unit is routed (Plan) and sent to a node.
	ArriveRoute Arrival = iota
	// ArriveDeferBegin: the unit is a BEGIN the proxy answers itself and
	// sends later, in one write with the transaction's first statement, to
	// the node planned for that statement (SessionFacts.Deferred).
	ArriveDeferBegin
	// ArriveCommitDeferred: a lone COMMIT of a deferred transaction that ran
	// nothing: the proxy answers COMMIT and the transaction ends, no node used.
	ArriveCommitDeferred
	// ArriveRollbackDeferred: a lone ROLLBACK of a deferred transaction that
	// ran nothing, or a COMMIT of one that failed (PostgreSQL answers the
	// end of a failed transaction with ROLLBACK): the proxy answers
	// ROLLBACK, no node used.
	ArriveRollbackDeferred
	// ArriveRefuseAborted: a statement in a deferred transaction whose first
	// statement could not be routed: refused with 25P02, as a node refuses
	// statements in a failed transaction.
	ArriveRefuseAborted
)

var arrivalNames = [...]string{ArriveRoute: "route", ArriveDeferBegin: "defer_begin",
	ArriveCommitDeferred: "commit_deferred", ArriveRollbackDeferred: "rollback_deferred", ArriveRefuseAborted: "refuse_aborted"}

// String returns "route", "defer_begin", "commit_deferred",
// "rollback_deferred" or "refuse_aborted".
func (a Arrival) String() string { return enumName(arrivalNames[:], uint8(a), "arrival") }

// MarshalText encodes the arrival as its String form.
func (a Arrival) MarshalText() ([]byte, error) {
	return enumMarshal(arrivalNames[:], uint8(a), "arrival")
}

// UnmarshalText decodes an arrival from its String form.
func (a *Arrival) UnmarshalText(text []byte) error {
	return enumUnmarshal(arrivalNames[:], (*uint8)(a), text, "arrival")
}

// PlanArrival says whether a simple Query (or a fastpath function call)
// needs a node now. In a deferred transaction (SessionFacts.Deferred.Open)
// that ran nothing, a lone COMMIT or ROLLBACK is answered without a node;
// once the transaction is aborted, every other statement is refused. A BEGIN is
// deferred (ArriveDeferBegin) only in transaction pooling, when nothing
// holds the session on a node, no BEGIN is deferred already, no extended
// message waits to be sent ahead of it, and it is one parsed BEGIN or START
// TRANSACTION with no session effects. A BEGIN the node might reject is not
// deferred: if BEGIN failed on the node, the statement sent with it would
// run on its own, outside the transaction the client believes it is in.
// The one such BEGIN known is SERIALIZABLE on a standby (PostgreSQL rejects
// it even when a later option changes the level), so a BEGIN naming
// SERIALIZABLE (Statement.NamesSerializable) is sent at once.
func PlanArrival(st Statement, s SessionFacts) Arrival {
	if d := &s.Deferred; d.Open {
		switch {
		case st.Statements == 1 && st.Tx == TxCommit && !d.Aborted:
			return ArriveCommitDeferred
		case st.Statements == 1 && (st.Tx == TxCommit || st.Tx == TxRollback):
			return ArriveRollbackDeferred
		case d.Aborted:
			return ArriveRefuseAborted
		}
		return ArriveRoute
	}
	if s.TransactionPooling && s.Held.Node == "" && !s.Deferred.Open && !s.BatchPending &&
		(st.Tx == TxBegin || st.Tx == TxBeginReadOnly) && st.Statements == 1 &&
		!st.SessionEffects && !st.Unparsed && !st.NamesSerializable {
		return ArriveDeferBegin
	}
	return ArriveRoute
}

// carriesBegin reports whether the unit st is sent with the session's
// deferred BEGIN: every unit of a deferred transaction that is not aborted,
// except a synced batch that only prepares (ShapePrepareOnly), which runs
// outside it, where Plan sends it (a read's on any node, a write's on the
// primary).
func carriesBegin(st Statement, d *DeferredBegin) bool {
	return d.Open && !d.Aborted && st.Shape != ShapePrepareOnly
}

// MayReadOnStandby reports whether the plan for r may send it to a standby:
// it reads (or only prepares a read, or opens a READ ONLY transaction), pins
// nothing, and nothing holds the session on a node or the primary. The
// proxy asks it before gathering the facts only such a read needs (pool
// room, the write position to read after).
func (r *PlanRequest) MayReadOnStandby() bool {
	f, st := &r.Session, &r.Statement
	mayRead := st.Access == AccessRead || r.preparesWriteWithoutPrimary() || (carriesBegin(*st, &f.Deferred) && f.Deferred.ReadOnly)
	return mayRead && st.Pins == 0 && f.PrimaryOnly == 0 && f.Held.Node == ""
}

// PreparesWrite reports whether r only prepares a write that nothing else keeps on the primary (no
// pin, no setting that keeps the session there, no held backend): the plan sends it to the
// primary while one is available and SessionFacts.PrimaryFull is false, and where a read's
// prepare would go otherwise.
func (r *PlanRequest) PreparesWrite() bool {
	st, f := &r.Statement, &r.Session
	return st.Shape == ShapePrepareOnly && st.Access == AccessWrite && st.Pins == 0 && f.PrimaryOnly == 0 && f.Held.Node == ""
}

// preparesWriteWithoutPrimary reports whether r only prepares a write (nothing executes, nothing
// pins, no setting keeps the session on the primary) while the primary cannot take it now: no
// node is an available primary (a failover), or none of its backends is free (PrimaryFull). The
// prepare then goes where a read's would rather than wait: a standby parses it, unless it lacks
// what the statement names; the statement's execution waits for the primary as any write does.
func (r *PlanRequest) preparesWriteWithoutPrimary() bool {
	if !r.PreparesWrite() {
		return false
	}
	if r.Session.PrimaryFull {
		return true
	}
	snap := r.Snapshot
	if snap == nil {
		snap = &Snapshot{}
	}
	_, err := Primary(snap, r.Policy, r.Now)
	var rerr *Error
	return errors.As(err, &rerr) && rerr.Code == NoPrimary
}

// leavesHeldBatch reports whether a unit that needs the primary may leave
// the standby that ran its batch's first, unsynced part: that part only
// read, outside a transaction block, without an error (after one the node
// skips up to Sync, and so must the rest), with no reply pending, and
// nothing else holds the session there (a pin, a deferred BEGIN). At
// PostgreSQL's default READ COMMITTED each statement of an implicit
// transaction takes its own snapshot, so the reads having run on a standby
// (within the lag limit) is what any read through pgowl is; a default
// isolation level the session set (SessionFacts.SetsIsolation) may make them
// share one snapshot, which two nodes would not.
func leavesHeldBatch(st Statement, s *SessionFacts) bool {
	held := &s.Held
	return held.OpenReadOnlyBatch && !held.RepliesPending && held.Role == RoleStandby &&
		s.Pins == 0 && !s.Deferred.Open && st.Request().Access == AccessWrite && !s.SetsIsolation
}

// Resend says when a unit whose backend failed before any reply reached the
// client may be sent again on a fresh connection (see Resend.Allows).
type Resend uint8

const (
	// ResendNever: the unit ran on a node that held the session (its
	// transaction, batch or pinned state is gone with the backend), or it
	// arrived on one and left a read-only batch's standby: the client is told.
	ResendNever Resend = iota
	// ResendIfNotRun: the unit may write or take pinning state: it is sent
	// again only when it cannot have run.
	ResendIfNotRun
	// ResendPrepareOnly: the unit only prepares and pins nothing: running it
	// twice is harmless, but one taken off an unresponsive node after it was
	// sent is not sent again.
	ResendPrepareOnly
	// ResendRead: the unit only reads and pins nothing: it may be sent again
	// even when it ran, unless its node went silent.
	ResendRead
)

var resendNames = [...]string{ResendNever: "never", ResendIfNotRun: "if_not_run", ResendPrepareOnly: "prepare_only", ResendRead: "read"}

// String returns "never", "if_not_run", "prepare_only" or "read".
func (r Resend) String() string { return enumName(resendNames[:], uint8(r), "resend") }

// MarshalText encodes the rule as its String form.
func (r Resend) MarshalText() ([]byte, error) { return enumMarshal(resendNames[:], uint8(r), "resend") }

// UnmarshalText decodes a rule from its String form.
func (r *Resend) UnmarshalText(text []byte) error {
	return enumUnmarshal(resendNames[:], (*uint8)(r), text, "resend")
}

// resendRule is the rule for a unit planned afresh (not on a held node).
func resendRule(st Statement, s *SessionFacts) Resend {
	switch {
	case s.LeftReadOnlyBatch:
		return ResendNever
	case st.Pins != 0:
		return ResendIfNotRun
	case st.Access == AccessRead:
		return ResendRead
	case st.Shape == ShapePrepareOnly:
		return ResendPrepareOnly
	}
	return ResendIfNotRun
}

// FailureKind is how a backend connection failed under a unit.
type FailureKind uint8

const (
	// FailureOther: the connection broke otherwise (closed, reset), or the
	// pool gave up a connection it was opening.
	FailureOther FailureKind = iota
	// FailureTerminated: the node said it was terminating the connection
	// (FATAL 57P01 or 57P05): a statement it was running is rolled back, and
	// one it had completed would have sent its reply first.
	FailureTerminated
	// FailureSilent: a timeout (TCP keepalive or user timeout), or the
	// unreachable host or network it reports when the host's address
	// stopped answering too: the node was reached and went silent.
	FailureSilent
	// FailureUnresponsive: the unit was taken off a node the monitor found
	// unresponsive (limits.first_reply_timeout).
	FailureUnresponsive
)

var failureNames = [...]string{FailureOther: "other", FailureTerminated: "terminated", FailureSilent: "silent", FailureUnresponsive: "unresponsive"}

// String returns "other", "terminated", "silent" or "unresponsive".
func (k FailureKind) String() string { return enumName(failureNames[:], uint8(k), "failure") }

// MarshalText encodes the kind as its String form.
func (k FailureKind) MarshalText() ([]byte, error) {
	return enumMarshal(failureNames[:], uint8(k), "failure")
}

// UnmarshalText decodes a kind from its String form.
func (k *FailureKind) UnmarshalText(text []byte) error {
	return enumUnmarshal(failureNames[:], (*uint8)(k), text, "failure")
}

// Failure is how a unit's backend failed.
type Failure struct {
	Kind FailureKind
	// Sent: the unit's request reached the kernel: the node may have run it.
	Sent bool
	// Answered: some reply of the unit reached the client's buffer.
	Answered bool
}

// Allows reports whether a unit planned with rule r may be sent again on a
// fresh connection after failure f. A pooled connection the node had
// already closed (a restart, idle_session_timeout, pg_terminate_backend of
// an idle backend) fails at once, and sending again is what the client
// expects. But the node may also have run the unit and gone before its
// reply left (a crash right after a COMMIT, or while the COMMIT waited for
// a synchronous standby; a host that vanished): sending a write again would
// run it twice. So a unit that may write is sent again only when it cannot
// have run: its request never left pgowl, or the node said it was
// terminating the connection. A crash restart's WARNING 57P02 does not say
// that: it also reaches a backend whose COMMIT is written and waits for a
// synchronous standby (FailureOther). A node gone silent is never sent to
// again, and the client learns at once that the node is lost. A unit taken
// off an unresponsive node may go elsewhere when it cannot have had an
// effect there.
func (r Resend) Allows(f Failure) bool {
	switch {
	case r == ResendNever || f.Answered:
		return false
	case f.Kind == FailureUnresponsive:
		return !f.Sent || r == ResendRead
	case f.Kind == FailureSilent:
		return false
	case !f.Sent || r == ResendRead || r == ResendPrepareOnly:
		return true
	}
	return f.Kind == FailureTerminated
}
