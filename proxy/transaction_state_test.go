package proxy

import (
	"bytes"
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/wire"
)

// heldBackend is a backend the session holds, whose node last reported status.
func heldBackend(status byte) *backend {
	return &backend{conn: &pool.Conn{TxStatus: status}, node: "n1"}
}

// txStateCase is one state of a session between units: the fields that hold
// it, and what the session reports for it.
type txStateCase struct {
	name  string
	setup func(sess *session)
	state txState
	// ready is the status of a ReadyForQuery pgowl sends itself.
	ready byte
	// inTransaction, failed and onNode are what the state's predicates say.
	inTransaction, failed, onNode bool
}

// txStateCases are the states of the table in doc.go ("The session's state
// machine"), with the status byte and predicates the session had for each
// before the state became one type (txState): readyStatus, inTransaction,
// inFailedTransaction and inBackendTransaction, each reading the fields.
// Where those disagreed, the row says so.
var txStateCases = []txStateCase{
	{name: "idle", setup: func(*session) {}, state: txIdle,
		ready: wire.TxIdle},
	{name: "deferred", setup: func(s *session) { s.deferred = &deferredBegin{} }, state: txDeferred,
		ready: wire.TxInBlock, inTransaction: true},
	{name: "deferred-aborted", setup: func(s *session) { s.deferred = &deferredBegin{aborted: true} }, state: txDeferredAborted,
		ready: wire.TxFailed, inTransaction: true, failed: true},
	{name: "in block", setup: func(s *session) { s.held = heldBackend(wire.TxInBlock) }, state: txInBlock,
		ready: wire.TxInBlock, inTransaction: true, onNode: true},
	{name: "failed", setup: func(s *session) { s.held = heldBackend(wire.TxFailed) }, state: txFailed,
		ready: wire.TxFailed, inTransaction: true, failed: true, onNode: true},
	{name: "failed: the node skips to Sync in a block", setup: func(s *session) {
		s.held = heldBackend(wire.TxInBlock)
		s.held.skipping = true
	}, state: txFailed, ready: wire.TxFailed, inTransaction: true, failed: true, onNode: true},
	{name: "failed: the node skips to Sync in an implicit transaction", setup: func(s *session) {
		s.held = heldBackend(wire.TxIdle)
		s.held.openBatch, s.held.skipping = true, true
	}, state: txBatchFailed, ready: wire.TxFailed, failed: true},
	{name: "pinned", setup: func(s *session) {
		s.held = heldBackend(wire.TxIdle)
		s.pins.take(classify.SessionListen)
	}, state: txPinned, ready: wire.TxIdle},
	{name: "open batch", setup: func(s *session) {
		s.held = heldBackend(wire.TxIdle)
		s.held.openBatch = true
	}, state: txOpenBatch, ready: wire.TxIdle},
	{name: "open read-only batch", setup: func(s *session) {
		s.held = heldBackend(wire.TxIdle)
		s.held.openBatch, s.held.openReadOnly = true, true
	}, state: txOpenReadOnlyBatch, ready: wire.TxIdle},
	{name: "open batch inside a block", setup: func(s *session) {
		s.held = heldBackend(wire.TxInBlock)
		s.held.openBatch = true
	}, state: txInBlock, ready: wire.TxInBlock, inTransaction: true, onNode: true},
	{name: "skip-until-Sync while idle", setup: func(s *session) { s.skip = skipToSync }, state: txIdle,
		ready: wire.TxIdle},
	{name: "skip-until-Sync in a block", setup: func(s *session) {
		s.held = heldBackend(wire.TxInBlock)
		s.skip = skipToSync
	}, state: txInBlock, ready: wire.TxInBlock, inTransaction: true, onNode: true},
	{name: "a held backend's status wins over a deferred BEGIN", setup: func(s *session) {
		s.deferred = &deferredBegin{}
		s.held = heldBackend(wire.TxInBlock)
	}, state: txInBlock, ready: wire.TxInBlock, inTransaction: true, onNode: true},
	{name: "a connection that never reported a status counts as failed", setup: func(s *session) {
		s.held = heldBackend(0)
		// Only hand-made connections lack a status (a pooled one has its
		// login's). inFailedTransaction said false here, while readyStatus
		// said E: the state says failed for both.
	}, state: txFailed, ready: wire.TxFailed, inTransaction: true, failed: true, onNode: true},
}

func TestTransactionStateReportsStatusAndPredicates(t *testing.T) {
	for _, tc := range txStateCases {
		t.Run(tc.name, func(t *testing.T) {
			sess := relaySession(&bytes.Buffer{})
			tc.setup(sess)
			state := sess.txState()
			if state != tc.state {
				t.Errorf("state %s, want %s", state, tc.state)
			}
			if got := state.readyStatus(); got != tc.ready {
				t.Errorf("readyStatus %q, want %q", got, tc.ready)
			}
			if got := state.inTransaction(); got != tc.inTransaction {
				t.Errorf("inTransaction %v, want %v", got, tc.inTransaction)
			}
			if got := state.failed(); got != tc.failed {
				t.Errorf("failed %v, want %v", got, tc.failed)
			}
			if got := state.onNode(); got != tc.onNode {
				t.Errorf("onNode %v, want %v", got, tc.onNode)
			}
		})
	}
}

// clientReplies splits what the session wrote to its client into frames.
func clientReplies(t *testing.T, sess *session, out *bytes.Buffer) (types []byte, last []byte) {
	t.Helper()
	sess.client.w.Flush()
	r := wire.NewReader(bytes.NewReader(out.Bytes()), 4096, 1<<20)
	for {
		typ, body, err := r.ReadFrame()
		if err != nil {
			return types, last
		}
		types = append(types, typ)
		last = append(last[:0], body...)
	}
}

// transactionStatement is the classification of a lone transaction-control statement.
func transactionStatement(tx classify.TxControl, kind classify.TxKind) classify.Effects {
	return classify.Effects{Statements: 1, Tx: tx, Access: classify.Read, Transaction: &classify.TransactionStatement{Kind: kind}}
}

// txTransitionCase is one transition pgowl makes without a node: the state
// before, what happens, and the client's ReadyForQuery status after.
type txTransitionCase struct {
	name   string
	before func(sess *session)
	event  func(sess *session)
	// ready is the status of the last ReadyForQuery the client got (0: none).
	ready byte
	// after is the state after the event.
	after txState
}

var txTransitionCases = []txTransitionCase{
	{name: "idle, BEGIN deferred: deferred",
		before: func(*session) {},
		event: func(s *session) {
			s.deferBegin([]byte("BEGIN\x00"), "BEGIN", transactionStatement(classify.TxBegin, classify.TxKindBegin))
		},
		ready: wire.TxInBlock, after: txDeferred},
	{name: "deferred, COMMIT with nothing run: idle",
		before: func(s *session) { s.deferred = &deferredBegin{} },
		event: func(s *session) {
			s.answerInDeferred(s.planArrival(transactionStatement(classify.TxEnd, classify.TxKindCommit)))
		},
		ready: wire.TxIdle},
	{name: "deferred-aborted, COMMIT: idle (answered ROLLBACK)",
		before: func(s *session) { s.deferred = &deferredBegin{aborted: true} },
		event: func(s *session) {
			s.answerInDeferred(s.planArrival(transactionStatement(classify.TxEnd, classify.TxKindCommit)))
		},
		ready: wire.TxIdle},
	{name: "deferred-aborted, a statement: stays deferred-aborted (25P02)",
		before: func(s *session) { s.deferred = &deferredBegin{aborted: true} },
		event: func(s *session) {
			s.answerInDeferred(s.planArrival(classify.Effects{Statements: 1, Access: classify.Read}))
		},
		ready: wire.TxFailed, after: txDeferredAborted},
	{name: "deferred, a statement: left to the node, nothing answered",
		before: func(s *session) { s.deferred = &deferredBegin{} },
		event: func(s *session) {
			s.answerInDeferred(s.planArrival(classify.Effects{Statements: 1, Access: classify.Read}))
		},
		after: txDeferred},
	{name: "deferred, a prepare-only batch failed outside it: deferred-aborted",
		before: func(s *session) { s.deferred = &deferredBegin{} },
		event: func(s *session) {
			// The batch's exchange failed (42601): the client is told, then the outcome applied.
			u, out := unit{}, exchangeOutcome{errCode: "42601", txStatus: wire.TxIdle}
			s.client.w.Write(wireReady(nil, s.clientTxStatus(&u, out.failed(), wire.TxIdle)))
			s.abortDeferredAfter(&u, &out)
		},
		ready: wire.TxFailed, after: txDeferredAborted},
	{name: "deferred, a prepare-only batch ran outside it: stays deferred",
		before: func(s *session) { s.deferred = &deferredBegin{} },
		event: func(s *session) {
			u, out := unit{}, exchangeOutcome{txStatus: wire.TxIdle}
			s.client.w.Write(wireReady(nil, s.clientTxStatus(&u, out.failed(), wire.TxIdle)))
			s.abortDeferredAfter(&u, &out)
		},
		ready: wire.TxInBlock, after: txDeferred},
}

func TestTransactionStateTransitionsWithoutANode(t *testing.T) {
	for _, tc := range txTransitionCases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			sess := relaySession(&out)
			tc.before(sess)
			tc.event(sess)
			types, last := clientReplies(t, sess, &out)
			var ready byte
			if len(types) > 0 && types[len(types)-1] == wire.MsgReadyForQuery && len(last) == 1 {
				ready = last[0]
			}
			if ready != tc.ready {
				t.Errorf("client got %q ending with ReadyForQuery %q, want %q", types, ready, tc.ready)
			}
			if got := sess.txState(); got != tc.after {
				t.Errorf("state after: %s, want %s", got, tc.after)
			}
		})
	}
}

func TestRefusedBatchMessageSkipsUntilSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		held *backend
		// toNode: the client's Sync still goes to the held node.
		toNode bool
	}{
		{name: "nothing of the segment reached a node"},
		{name: "a held backend in a block, batch synced", held: heldBackend(wire.TxInBlock)},
		{name: "the segment's start reached the held node at a Flush", held: func() *backend {
			be := heldBackend(wire.TxIdle)
			be.openBatch = true
			return be
		}(), toNode: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			sess := relaySession(&out)
			sess.held = tc.held
			sess.refuseInBatch(&clientError{SQLState: "53400", Message: "refused"})
			types, _ := clientReplies(t, sess, &out)
			if string(types) != "E" {
				t.Errorf("client got %q, want one ErrorResponse and no ReadyForQuery before Sync", types)
			}
			want := skipToSync
			if tc.toNode {
				want = skipToNodeSync
			}
			if sess.skip != want {
				t.Errorf("skip %d, want %d", sess.skip, want)
			}
		})
	}
}
