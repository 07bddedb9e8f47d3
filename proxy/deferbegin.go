package proxy

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// A deferred BEGIN is a lone BEGIN (or START TRANSACTION) that pgowl answers
// itself in transaction pooling, and sends to a node only together with the
// transaction's first statement, in the same write. The node is chosen for
// that statement as it would have been for the BEGIN, so the transaction
// lands where it would have landed, but no backend is held while the client
// is between BEGIN and its first statement: a transaction of BEGIN, one
// statement and COMMIT holds a backend for one client round trip instead of
// two. BEGIN's NOTICE and log line name the node when it really runs there.
type deferredBegin struct {
	query   []byte // the Query message body, as the client sent it
	sql     string
	effects classify.Effects
	start   time.Time
	// aborted: the transaction's first statement could not be routed, or a
	// prepare-only batch run outside it failed. As on a node, the
	// transaction is then failed until ROLLBACK or COMMIT.
	aborted bool
}

// planArrival asks the plan whether a simple Query (or a function call)
// with effects eff needs a node now, or is a BEGIN pgowl answers itself, or
// ends or is refused by a deferred transaction (route.PlanArrival states
// the rules).
func (sess *session) planArrival(eff classify.Effects) route.Arrival {
	f := route.SessionFacts{TransactionPooling: sess.srv.transactionPooling, BatchPending: len(sess.batch.msgs) > 0}
	if d := sess.deferred; d != nil {
		f.Deferred.Open, f.Deferred.Aborted = true, d.aborted
	}
	if be := sess.held; be != nil {
		f.Held = route.HeldNode{Node: be.node, Role: be.role}
	}
	return route.PlanArrival(planStatement(eff), f)
}

// txKind is the kind of the transaction-control statement of eff, TxKindNone without one.
func txKind(eff classify.Effects) classify.TxKind {
	if eff.Transaction == nil {
		return classify.TxKindNone
	}
	return eff.Transaction.Kind
}

// deferBegin answers a BEGIN and keeps it for the transaction's first statement.
func (sess *session) deferBegin(body []byte, sql string, eff classify.Effects) {
	sess.deferred = &deferredBegin{query: append([]byte(nil), body...), sql: sql, effects: eff, start: time.Now()}
	sess.send(&pgproto3.CommandComplete{CommandTag: []byte("BEGIN")})
	sess.sendReady()
}

// answerInDeferred answers a unit of a deferred transaction that the plan
// says needs no node (route.PlanArrival): COMMIT or ROLLBACK of a
// transaction that ran nothing, and any statement of a failed one.
func (sess *session) answerInDeferred(arrival route.Arrival) {
	switch arrival {
	case route.ArriveCommitDeferred, route.ArriveRollbackDeferred:
		commit := arrival == route.ArriveCommitDeferred
		tag := "ROLLBACK"
		if commit {
			tag = "COMMIT"
		}
		sess.deferred = nil
		sess.endPgowlTransaction(commit)
		sess.send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
		sess.sendReady()
		sess.log.Debug().Str("statement", tag).Msg("transaction ended before any statement ran; no node was used")
	case route.ArriveRefuseAborted:
		sess.send(toErrorResponse(abortedTransaction()))
		sess.sendReady()
	}
}

// abortedTransaction is PostgreSQL's error for a statement in a failed transaction.
func abortedTransaction() error {
	return &clientError{SQLState: "25P02",
		Message: "current transaction is aborted, commands ignored until end of transaction block",
		Hint:    "pgowl could not route the transaction's first statement, so the transaction never started on a node. End it with ROLLBACK and retry it."}
}

// writeDeferredBegin sends the deferred BEGIN ahead of the unit on be; its
// replies are consumed by relayDeferredBegin.
func (sess *session) writeDeferredBegin(be *backend) {
	be.conn.WriteQueryBody(sess.deferred.query)
	be.expect.push(expectation{typ: wire.MsgQuery, swallow: true})
}

// relayDeferredBegin consumes the node's replies to a deferred BEGIN, up to
// its ReadyForQuery. The client had its BEGIN reply already; it gets BEGIN's
// NOTICE now, naming the node, and any error or warning the BEGIN raised.
func (sess *session) relayDeferredBegin(be *backend, u *unit, out *exchangeOutcome, quiet bool) error {
	r := be.conn.Reader
	for {
		typ, body, err := r.ReadFrame()
		if err != nil {
			return err
		}
		if quiet && typ != wire.MsgReadyForQuery {
			continue // failedTransactionQuery's own error
		}
		if quiet && len(body) == 1 {
			be.conn.TxStatus = body[0]
			be.expect.pop()
			return nil
		}
		var code string
		if typ == wire.MsgErrorResponse || typ == wire.MsgNoticeResponse {
			severity, c, message := errorSeverityFields(body)
			if closing := deadConnectionReply(be, u, typ, severity, c, message); closing != nil {
				return closing // before BEGIN's NOTICE: the unit is sent again, or the client told it was lost
			}
			code = c
		}
		if !u.beginReported {
			// Once per unit, even when a dead backend makes it run again.
			u.beginReported = true
			sess.writeNotice(u.beginDecision, nil)
		}
		switch typ {
		case wire.MsgReadyForQuery:
			if len(body) != 1 {
				return fmt.Errorf("malformed ReadyForQuery from %s", be.node)
			}
			be.conn.TxStatus = body[0]
			be.expect.pop()
			if !u.beginLogged {
				u.beginLogged = true
				sess.logBegin(u)
			}
			return nil
		case wire.MsgErrorResponse:
			out.noteError(code)
			sess.startReply(u) // the statement's own NOTICE goes first, as for any reply of the unit
			if err := sess.forwardFrame(appendFrame(sess.scratch[:0], wire.MsgErrorResponse, body)); err != nil {
				return err
			}
		case wire.MsgNoticeResponse:
			sess.startReply(u) // the statement's own NOTICE goes first, as for any reply of the unit
			if err := sess.forwardFrame(appendFrame(sess.scratch[:0], wire.MsgNoticeResponse, body)); err != nil {
				return err
			}
		}
		// CommandComplete BEGIN and ParameterStatus were the client's already.
	}
}

// logBegin writes the routing-log line of a deferred BEGIN that ran.
func (sess *session) logBegin(u *unit) {
	d := sess.deferred
	b := unit{start: d.start, effects: d.effects, sql: d.sql}
	last := sess.last
	sess.logUnit(&b, u.beginDecision, "ok")
	sess.last = last
}

// clientTxStatus is the ReadyForQuery status the client gets for a unit the
// node answered with status: the node's, except for a unit that ran outside
// the session's deferred transaction (a synced batch that only prepares).
// The client is inside that transaction, and an error fails it, as it would
// have on a node (abortDeferredAfter records it once the exchange is
// over). failed says the unit's exchange failed so far.
func (sess *session) clientTxStatus(u *unit, failed bool, status byte) byte {
	d := sess.deferred
	if d == nil || u.carriesBegin || u.replaysFailure {
		return status
	}
	if failed || d.aborted {
		return wire.TxFailed
	}
	return wire.TxInBlock
}

// abortDeferredAfter applies a unit's outcome to the deferred BEGIN: a unit
// that ran outside it (a synced batch that only prepares) and failed fails
// the transaction, as it told the client (clientTxStatus).
func (sess *session) abortDeferredAfter(u *unit, out *exchangeOutcome) {
	if d := sess.deferred; d != nil && !u.carriesBegin && !u.replaysFailure && out.failed() {
		d.aborted = true
	}
}

// failedTransactionQuery opens a transaction and fails it, without effect.
const failedTransactionQuery = "BEGIN; SELECT 1/0"

// writeFailedTransaction prepares be for a batch that ends a failed deferred
// transaction: the node gets a failed transaction to end, and answers the
// batch as PostgreSQL answers COMMIT or ROLLBACK of one. The replies to the
// injected query are not the client's.
func (sess *session) writeFailedTransaction(be *backend) {
	be.conn.WriteQuery(failedTransactionQuery)
	be.expect.push(expectation{typ: wire.MsgQuery, swallow: true, quiet: true})
}
