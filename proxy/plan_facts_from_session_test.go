package proxy

import (
	"io"
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// TestHeldReadOnlyBatchFactsReachThePlan checks that the facts the plan
// needs to let a batch leave its standby are gathered from the held backend
// and the session, and that each one that must keep the batch there does.
func TestHeldReadOnlyBatchFactsReachThePlan(t *testing.T) {
	write := classify.Effects{Access: classify.Write, Reason: classify.ReasonWrite, Subject: "UPDATE", Statements: 1}
	read := classify.Effects{Access: classify.Read, Reason: classify.ReasonReadOnly, Subject: "SELECT", Statements: 1}
	cases := []struct {
		name    string
		effects classify.Effects
		setup   func(s *session, be *backend)
		leave   bool
	}{
		{name: "a write after reads on a standby leaves", effects: write, leave: true},
		{name: "a read stays", effects: read},
		{name: "an error in the batch keeps it (the node skips to Sync)", effects: write,
			setup: func(_ *session, be *backend) { be.skipping = true }},
		{name: "replies still to read keep it", effects: write,
			setup: func(_ *session, be *backend) { be.expect.push(expectation{typ: wire.MsgExecute}) }},
		{name: "a pin keeps it", effects: write,
			setup: func(s *session, _ *backend) { s.pins.take(classify.SessionAdvisoryLock) }},
		{name: "a batch on the primary stays", effects: write,
			setup: func(_ *session, be *backend) { be.role = route.RolePrimary }},
		{name: "a batch that wrote stays", effects: write,
			setup: func(_ *session, be *backend) { be.openReadOnly = false }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sess := relaySession(io.Discard)
			be := heldBackend(wire.TxIdle)
			be.role, be.openBatch, be.openReadOnly = route.RoleStandby, true, true
			sess.held = be
			if tc.setup != nil {
				tc.setup(sess, be)
			}
			r := sess.planRequest(&unit{effects: tc.effects}, &route.Snapshot{})
			out, err := route.Plan(r)
			if err != nil {
				t.Fatal(err)
			}
			if out.LeaveHeldBatch != tc.leave {
				t.Fatalf("leave the batch: %v, want %v (facts %+v)", out.LeaveHeldBatch, tc.leave, r.Session.Held)
			}
			if !tc.leave && (!out.OnHeld || out.Resend != route.ResendNever) {
				t.Fatalf("a unit kept on the held backend: on held %v, resend %v", out.OnHeld, out.Resend)
			}
		})
	}
}

// TestArrivalFactsFromSession checks what planArrival gathers: pooling
// mode, a held backend, and the deferred transaction's state.
func TestArrivalFactsFromSession(t *testing.T) {
	begin := transactionStatement(classify.TxBegin, classify.TxKindBegin)
	commit := transactionStatement(classify.TxEnd, classify.TxKindCommit)
	serializable := transactionStatement(classify.TxBegin, classify.TxKindBegin)
	serializable.Transaction.NamesSerializable = true
	cases := []struct {
		name    string
		pooling bool
		setup   func(s *session)
		effects classify.Effects
		want    route.Arrival
	}{
		{name: "BEGIN in transaction pooling", pooling: true, effects: begin, want: route.ArriveDeferBegin},
		{name: "BEGIN in session pooling", effects: begin, want: route.ArriveRoute},
		{name: "BEGIN ISOLATION LEVEL SERIALIZABLE", pooling: true, effects: serializable, want: route.ArriveRoute},
		{name: "BEGIN while held", pooling: true, effects: begin, want: route.ArriveRoute,
			setup: func(s *session) { s.held = heldBackend(wire.TxIdle) }},
		{name: "COMMIT of a deferred transaction", pooling: true, effects: commit, want: route.ArriveCommitDeferred,
			setup: func(s *session) { s.deferred = &deferredBegin{} }},
		{name: "COMMIT of an aborted deferred transaction", pooling: true, effects: commit, want: route.ArriveRollbackDeferred,
			setup: func(s *session) { s.deferred = &deferredBegin{aborted: true} }},
		{name: "a statement of an aborted deferred transaction", pooling: true, want: route.ArriveRefuseAborted,
			effects: classify.Effects{Access: classify.Read, Reason: classify.ReasonReadOnly, Statements: 1},
			setup:   func(s *session) { s.deferred = &deferredBegin{aborted: true} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sess := relaySession(io.Discard)
			sess.srv.transactionPooling = tc.pooling
			if tc.setup != nil {
				tc.setup(sess)
			}
			if got := sess.planArrival(tc.effects); got != tc.want {
				t.Fatalf("arrival %v, want %v", got, tc.want)
			}
		})
	}
}
