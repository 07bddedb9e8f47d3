package proxy

import (
	"bytes"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/wire"
)

// exchangeOutcome is what one exchange with a backend did, as the relay saw
// its replies pass: the relay returns it, and the session's parts apply it
// afterwards (applyOutcome), each to its own state. It is a value: nothing
// in it points back into the session or the backend.
type exchangeOutcome struct {
	// node is the node the exchange ran on.
	node string
	// errCode is the SQLSTATE of the first ErrorResponse of the exchange
	// (the deferred BEGIN's included), "" when none came.
	errCode string
	// committed: a COMMIT ended a transaction in the exchange, and no
	// ROLLBACK came after it. Command tags are read only when the unit
	// controls transactions or settings wait for a transaction's end (see
	// readsCommandTags); otherwise it stays false.
	committed bool
	// txStatus is the backend's transaction status once the exchange ended:
	// that of the last ReadyForQuery, or the one before the exchange when
	// none came (a batch sent at a Flush).
	txStatus byte
	// completions counts the node's CommandComplete replies: the
	// statements that ran to completion.
	completions int
}

// failed reports whether the node answered the exchange with an error.
func (o *exchangeOutcome) failed() bool { return o.errCode != "" }

// noteError records an ErrorResponse's SQLSTATE; the first one is the
// exchange's.
func (o *exchangeOutcome) noteError(code string) {
	if o.errCode == "" {
		o.errCode = code
	}
}

// noteCommandTag follows a CommandComplete's tag: the transaction's settings
// take effect if a COMMIT ended it, even one followed by more statements in
// the same string, and not if a ROLLBACK came last.
func (o *exchangeOutcome) noteCommandTag(tag []byte) {
	switch {
	case bytes.Equal(tag, []byte("COMMIT")):
		o.committed = true
	case bytes.Equal(tag, []byte("ROLLBACK")):
		o.committed = false
	}
}

// logOutcome is the outcome field of the unit's routing-log line: "ok", or
// the first error's SQLSTATE.
func (o *exchangeOutcome) logOutcome() string {
	if o.errCode != "" {
		return o.errCode
	}
	return "ok"
}

// readsCommandTags reports whether the relay must read CommandComplete tags
// to know whether a transaction committed: the unit controls transactions,
// or settings made in a transaction wait for its end. Otherwise the frames
// pass through unread.
func readsCommandTags(eff classify.Effects, pendingSets int) bool {
	return pendingSets > 0 || eff.Tx != 0
}

// effectsTracking is how the session follows a unit's session effects once
// its outcome is known.
type effectsTracking int

const (
	// trackNothing: the unit ran nothing, had no session effects, or was a
	// single statement that failed and so changed nothing.
	trackNothing effectsTracking = iota
	// trackUncertain: part of the unit may have taken effect (a
	// multi-statement string, a failed one, or part of an extended batch
	// sent at a Flush that an error before Sync may still undo): every pin
	// it may have taken is taken, and what it may have changed is unknown
	// (trackUncertainEffects).
	trackUncertain
	// trackExact: a single statement that succeeded; its pins, settings and
	// discards are followed exactly (trackSessionEffects).
	trackExact
)

// sessionEffectsTracking decides how a unit's session effects are followed
// from its outcome. openBatch says the backend's extended batch is not
// synced yet.
func sessionEffectsTracking(u *unit, out *exchangeOutcome, openBatch bool) effectsTracking {
	if u.effects.Session == 0 || u.runsNothing {
		// A unit that only prepared and described ran nothing: the effects
		// are those of statements that may run later, and count then.
		return trackNothing
	}
	switch {
	case out.failed() && u.effects.Statements == 1:
		// A statement that failed changed nothing.
		return trackNothing
	case out.failed() || u.effects.Statements != 1 || u.setSQL == "" || openBatch:
		// Part of a multi-statement string may have taken effect (it may
		// COMMIT before a later statement fails), and pgowl follows settings
		// and releases only for single statements. A part of an extended
		// batch sent at a Flush is not settled either: an error before Sync
		// undoes it with the implicit transaction.
		return trackUncertain
	}
	return trackExact
}

// pendingSetsFate is what becomes of the SETs made inside a transaction
// once a unit's outcome is known.
type pendingSetsFate int

const (
	// pendingKept: the transaction goes on; its end decides.
	pendingKept pendingSetsFate = iota
	// pendingKeptUncertain: the transaction goes on, but pgowl can no longer
	// tell which of its SETs will survive (a ROLLBACK TO SAVEPOINT, or a
	// multi-statement string that controlled transactions).
	pendingKeptUncertain
	// pendingSettled: the transaction ended (or chained): committed, the
	// SETs join the session's settings; rolled back, they are dropped.
	pendingSettled
)

// settleFate decides pendingSetsFate for a unit from its outcome, and
// whether the transaction that held the SETs committed. A ROLLBACK AND
// CHAIN did not commit, whatever the tags said. savepointFollowed says the
// settings tracker followed the unit's ROLLBACK TO (its savepoint was seen
// set): what survived is then known.
func settleFate(eff classify.Effects, out *exchangeOutcome, savepointFollowed bool) (fate pendingSetsFate, committed bool) {
	if out.txStatus == wire.TxIdle {
		return pendingSettled, out.committed
	}
	if out.failed() {
		return pendingKept, false // the transaction is failed: its end decides
	}
	if eff.Statements != 1 {
		if eff.Tx != classify.TxNone {
			return pendingKeptUncertain, false
		}
		return pendingKept, false
	}
	switch txKind(eff) {
	case classify.TxKindRollbackToSavepoint:
		if savepointFollowed {
			return pendingKept, false
		}
		return pendingKeptUncertain, false
	case classify.TxKindCommitAndChain:
		// Committed; the chained transaction starts without pending SETs.
		return pendingSettled, out.committed
	case classify.TxKindRollbackAndChain:
		return pendingSettled, false
	}
	return pendingKept, false
}

// holdsBackend reports whether the session must stay on the backend its
// unit ran on: a pin, an extended batch not yet synced, or a transaction
// still open there.
func holdsBackend(pinned, openBatch bool, status byte) bool {
	return pinned || openBatch || status != wire.TxIdle
}
