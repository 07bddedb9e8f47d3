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
	return &backend{conn: &pool.Conn{TxStatus: status, Prepared: map[string]struct{}{}}, node: "n1"}
}

// txStateCase is one state of a session between units: the fields that hold
// it, and what the session reports for it.
type txStateCase struct {
	name  string
	setup func(sess *session)
	// ready is the status of a ReadyForQuery pgowl sends itself.
	ready byte
	// inTransaction, failed and onNode are inTransaction, inFailedTransaction
	// and inBackendTransaction.
	inTransaction, failed, onNode bool
}

// txStateCases are the states of the table in doc.go ("The session's state
// machine"), with the status byte and predicates the session had for each
// before the state became one type.
var txStateCases = []txStateCase{
	{name: "idle", setup: func(*session) {},
		ready: wire.TxIdle},
	{name: "deferred", setup: func(s *session) { s.deferred = &deferredBegin{} },
		ready: wire.TxInBlock, inTransaction: true},
	{name: "deferred-aborted", setup: func(s *session) { s.deferred = &deferredBegin{aborted: true} },
		ready: wire.TxFailed, inTransaction: true, failed: true},
	{name: "in block", setup: func(s *session) { s.held = heldBackend(wire.TxInBlock) },
		ready: wire.TxInBlock, inTransaction: true, onNode: true},
	{name: "failed", setup: func(s *session) { s.held = heldBackend(wire.TxFailed) },
		ready: wire.TxFailed, inTransaction: true, failed: true, onNode: true},
	{name: "failed: the node skips to Sync in a block", setup: func(s *session) {
		s.held = heldBackend(wire.TxInBlock)
		s.held.skipping = true
	}, ready: wire.TxFailed, inTransaction: true, failed: true, onNode: true},
	{name: "failed: the node skips to Sync in an implicit transaction", setup: func(s *session) {
		s.held = heldBackend(wire.TxIdle)
		s.held.openBatch, s.held.skipping = true, true
	}, ready: wire.TxFailed, failed: true},
	{name: "pinned", setup: func(s *session) {
		s.held = heldBackend(wire.TxIdle)
		s.pinBits = classify.SessionListen
	}, ready: wire.TxIdle},
	{name: "open batch", setup: func(s *session) {
		s.held = heldBackend(wire.TxIdle)
		s.held.openBatch = true
	}, ready: wire.TxIdle},
	{name: "open read-only batch", setup: func(s *session) {
		s.held = heldBackend(wire.TxIdle)
		s.held.openBatch, s.held.openReadOnly = true, true
	}, ready: wire.TxIdle},
	{name: "open batch inside a block", setup: func(s *session) {
		s.held = heldBackend(wire.TxInBlock)
		s.held.openBatch = true
	}, ready: wire.TxInBlock, inTransaction: true, onNode: true},
	{name: "skip-until-Sync while idle", setup: func(s *session) { s.skipUntilSync = true },
		ready: wire.TxIdle},
	{name: "skip-until-Sync in a block", setup: func(s *session) {
		s.held = heldBackend(wire.TxInBlock)
		s.skipUntilSync, s.syncRefusedSegment = true, false
	}, ready: wire.TxInBlock, inTransaction: true, onNode: true},
	{name: "a held backend's status wins over a deferred BEGIN", setup: func(s *session) {
		s.deferred = &deferredBegin{}
		s.held = heldBackend(wire.TxInBlock)
	}, ready: wire.TxInBlock, inTransaction: true, onNode: true},
	{name: "a connection that never reported a status counts as failed", setup: func(s *session) {
		s.held = heldBackend(0)
	}, ready: wire.TxFailed, inTransaction: true, onNode: true},
}

func TestTransactionStateReportsStatusAndPredicates(t *testing.T) {
	for _, tc := range txStateCases {
		t.Run(tc.name, func(t *testing.T) {
			sess := relaySession(&bytes.Buffer{})
			tc.setup(sess)
			if got := sess.readyStatus(); got != tc.ready {
				t.Errorf("readyStatus %q, want %q", got, tc.ready)
			}
			if got := sess.inTransaction(); got != tc.inTransaction {
				t.Errorf("inTransaction %v, want %v", got, tc.inTransaction)
			}
			if got := sess.inFailedTransaction(); got != tc.failed {
				t.Errorf("inFailedTransaction %v, want %v", got, tc.failed)
			}
			if got := sess.inBackendTransaction(); got != tc.onNode {
				t.Errorf("inBackendTransaction %v, want %v", got, tc.onNode)
			}
		})
	}
}

// clientReplies splits what the session wrote to its client into frames.
func clientReplies(t *testing.T, sess *session, out *bytes.Buffer) (types []byte, last []byte) {
	t.Helper()
	sess.w.Flush()
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
	// deferred and aborted describe the deferred BEGIN after the event.
	deferred, aborted bool
}

var txTransitionCases = []txTransitionCase{
	{name: "idle, BEGIN deferred: deferred",
		before: func(*session) {},
		event: func(s *session) {
			s.deferBegin([]byte("BEGIN\x00"), "BEGIN", transactionStatement(classify.TxBegin, classify.TxKindBegin))
		},
		ready: wire.TxInBlock, deferred: true},
	{name: "deferred, COMMIT with nothing run: idle",
		before: func(s *session) { s.deferred = &deferredBegin{} },
		event: func(s *session) {
			s.answerInDeferred(transactionStatement(classify.TxEnd, classify.TxKindCommit))
		},
		ready: wire.TxIdle},
	{name: "deferred-aborted, COMMIT: idle (answered ROLLBACK)",
		before: func(s *session) { s.deferred = &deferredBegin{aborted: true} },
		event: func(s *session) {
			s.answerInDeferred(transactionStatement(classify.TxEnd, classify.TxKindCommit))
		},
		ready: wire.TxIdle},
	{name: "deferred-aborted, a statement: stays deferred-aborted (25P02)",
		before: func(s *session) { s.deferred = &deferredBegin{aborted: true} },
		event: func(s *session) {
			s.answerInDeferred(classify.Effects{Statements: 1, Access: classify.Read})
		},
		ready: wire.TxFailed, deferred: true, aborted: true},
	{name: "deferred, a statement: left to the node, nothing answered",
		before: func(s *session) { s.deferred = &deferredBegin{} },
		event: func(s *session) {
			s.answerInDeferred(classify.Effects{Statements: 1, Access: classify.Read})
		},
		deferred: true},
	{name: "deferred, a prepare-only batch failed outside it: deferred-aborted",
		before: func(s *session) { s.deferred = &deferredBegin{} },
		event: func(s *session) {
			u := unit{errCode: "42601"}
			s.w.Write(wireReady(nil, s.clientTxStatus(&u, wire.TxIdle)))
		},
		ready: wire.TxFailed, deferred: true, aborted: true},
	{name: "deferred, a prepare-only batch ran outside it: stays deferred",
		before: func(s *session) { s.deferred = &deferredBegin{} },
		event: func(s *session) {
			u := unit{}
			s.w.Write(wireReady(nil, s.clientTxStatus(&u, wire.TxIdle)))
		},
		ready: wire.TxInBlock, deferred: true},
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
			if got := sess.deferred != nil; got != tc.deferred {
				t.Errorf("deferred BEGIN kept: %v, want %v", got, tc.deferred)
			}
			if got := sess.deferred != nil && sess.deferred.aborted; got != tc.aborted {
				t.Errorf("deferred BEGIN aborted: %v, want %v", got, tc.aborted)
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
			if !sess.skipUntilSync || sess.syncRefusedSegment != tc.toNode {
				t.Errorf("skipUntilSync %v, Sync to the node %v; want true, %v", sess.skipUntilSync, sess.syncRefusedSegment, tc.toNode)
			}
		})
	}
}
