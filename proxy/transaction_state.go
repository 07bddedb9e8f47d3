package proxy

import "github.com/pgowl/pgowl/wire"

// txState is where the client's transaction stands between units (doc.go,
// "The session's state machine"). Everything that asks whether the client
// is in a transaction, whether it failed, or which status pgowl reports in a
// ReadyForQuery of its own asks the session's txState.
//
// The state is read from the facts that make it, each kept where it is
// learnt: the held backend's last ReadyForQuery status (the node's word,
// recorded on the connection), its skipping and open-batch flags (set by the
// relay), and the BEGIN pgowl deferred (deferbegin.go). session.txState is
// the one place that reads them together.
//
// Transitions (the event, then the state it leads to):
//
//	idle          a BEGIN pgowl may defer (route.PlanArrival)        deferred
//	idle          a unit the node answers T (BEGIN, or a statement    in block
//	              inside a block sent with it)
//	idle          a unit that pins (LISTEN, a temporary table, ...)   pinned
//	idle          an extended batch sent at a Flush                   open batch, or open
//	                                                                  read-only batch when it only read
//	deferred      the first statement, sent with BEGIN, runs          in block (or failed)
//	deferred      the first statement finds no node, or is refused    deferred-aborted
//	              for its cost; a prepare-only batch outside it fails,
//	              finds no node or loses its backend
//	deferred      COMMIT or ROLLBACK with nothing run                 idle
//	deferred-     COMMIT or ROLLBACK (COMMIT is answered ROLLBACK);   idle; deferred-aborted
//	aborted       any other statement gets 25P02
//	in block      an error                                            failed
//	in block      COMMIT or ROLLBACK                                  idle (or pinned)
//	failed        ROLLBACK, COMMIT, ROLLBACK TO SAVEPOINT             idle (pinned), or in block
//	open batch    Sync (or a Query) answered I                        idle (or pinned)
//	open batch    an error before Sync                                batch failed
//	batch failed  Sync, answered I                                    idle (or pinned)
//	open read-    a part that writes (Outcome.LeaveHeldBatch):        idle, then the part
//	only batch    pgowl syncs it away from the client                 is planned afresh
//	pinned        the node says the pinned state is gone, DISCARD ALL idle
//	any held      the backend is lost                                 idle (the client is told)
//
// Skip-until-Sync on the client's side is a separate fact (syncSkip): it
// says what happens to the client's next messages, not where its
// transaction stands, and may hold in any state.
type txState uint8

const (
	// txIdle: no transaction and no backend held; the next unit is planned afresh, on any node.
	txIdle txState = iota
	// txDeferred: pgowl answered a BEGIN itself and sends it with the
	// transaction's first statement, to the node planned for that statement.
	txDeferred
	// txDeferredAborted: the deferred transaction's first statement could
	// not be routed (or was refused). pgowl answers 25P02 until COMMIT or
	// ROLLBACK, which it answers ROLLBACK; no node has the transaction.
	txDeferredAborted
	// txInBlock: the held backend's node reported T; units run there (IN_TRANSACTION).
	txInBlock
	// txFailed: the held backend's transaction block failed: its node
	// reported E, or skips messages up to Sync after an error inside the
	// block. A connection that never reported a status (or reported one
	// PostgreSQL does not send) counts as failed too.
	txFailed
	// txBatchFailed: an error in an extended batch sent at a Flush, outside
	// a transaction block: the held backend's node skips messages up to Sync.
	txBatchFailed
	// txPinned: the held backend's node is between transactions, and a pin
	// keeps the session there (SESSION_PINNED).
	txPinned
	// txOpenBatch: an extended batch was sent at a Flush without its Sync:
	// its implicit transaction is open on the held backend, and the session
	// stays there.
	txOpenBatch
	// txOpenReadOnlyBatch: as txOpenBatch, and everything sent since the last
	// Sync only read, outside a block: a later part that writes may leave the
	// standby (route.Outcome.LeaveHeldBatch).
	txOpenReadOnlyBatch
)

var txStateNames = [...]string{
	txIdle:              "idle",
	txDeferred:          "deferred",
	txDeferredAborted:   "deferred-aborted",
	txInBlock:           "in block",
	txFailed:            "failed",
	txBatchFailed:       "batch failed",
	txPinned:            "pinned",
	txOpenBatch:         "open batch",
	txOpenReadOnlyBatch: "open read-only batch",
}

// String names the state as doc.go's table does.
func (s txState) String() string {
	if int(s) < len(txStateNames) {
		return txStateNames[s]
	}
	return "unknown"
}

// readyStatus is the status byte of a ReadyForQuery pgowl sends itself in state s.
func (s txState) readyStatus() byte {
	switch s {
	case txDeferred, txInBlock:
		return wire.TxInBlock
	case txDeferredAborted, txFailed, txBatchFailed:
		return wire.TxFailed
	}
	return wire.TxIdle
}

// inTransaction reports whether the client is inside a transaction block,
// on a node or deferred.
func (s txState) inTransaction() bool {
	switch s {
	case txDeferred, txDeferredAborted, txInBlock, txFailed:
		return true
	}
	return false
}

// failed reports whether the client's transaction (or implicit transaction
// of a batch) has failed: only its end is accepted.
func (s txState) failed() bool {
	switch s {
	case txDeferredAborted, txFailed, txBatchFailed:
		return true
	}
	return false
}

// onNode reports whether a transaction block is open on a node (a deferred
// BEGIN alone has reached none).
func (s txState) onNode() bool { return s == txInBlock || s == txFailed }

// workInFlight reports whether the client has work open on a node: a
// transaction block, or a pipeline not yet synced, its implicit transaction
// open (its statements' effects end with its Sync) or failed (the node skips
// to the Sync, which must reach it). PAUSE waits for such work and does not
// hold its next unit; the shutdown's drain lets it reach its end.
func (s txState) workInFlight() bool {
	return s.onNode() || s == txOpenBatch || s == txOpenReadOnlyBatch || s == txBatchFailed
}

// heldTxState is the state of a session that holds be.
func heldTxState(be *backend) txState {
	status := be.conn.TxStatus
	switch {
	case status == wire.TxInBlock && !be.skipping:
		return txInBlock
	case status == wire.TxIdle && be.skipping:
		return txBatchFailed
	case status != wire.TxIdle:
		return txFailed
	case be.openBatch && be.openReadOnly:
		return txOpenReadOnlyBatch
	case be.openBatch:
		return txOpenBatch
	}
	return txPinned
}

// txState is where the session's transaction stands now. A held backend
// decides; without one, the deferred BEGIN does. (The two do not hold at
// once between units: a BEGIN is deferred only without a held backend, and
// the unit that carries it ends the deferral before the session holds the
// backend it ran on.)
func (sess *session) txState() txState {
	if be := sess.held; be != nil {
		return heldTxState(be)
	}
	if d := sess.deferred; d != nil {
		if d.aborted {
			return txDeferredAborted
		}
		return txDeferred
	}
	return txIdle
}

// syncSkip is the client side of skip-until-Sync: after pgowl refuses a
// message of an extended segment (or loses its backend mid-batch), it drops
// the client's messages up to Sync, as PostgreSQL does after an error.
// Entered by refuseInBatch (a refused message) and by endRefused (a refused
// unit that does not end with ReadyForQuery; the cost guard's refusal sets
// it the same way); left by the client's Sync, in the session's loop.
type syncSkip uint8

const (
	// skipNone: client messages are handled.
	skipNone syncSkip = iota
	// skipToSync: client messages are dropped up to Sync, which pgowl
	// answers with a ReadyForQuery of its own.
	skipToSync
	// skipToNodeSync: as skipToSync, but part of the refused segment already
	// reached the held node (sent at a Flush): the client's Sync goes there,
	// to end the segment on the node.
	skipToNodeSync
)
