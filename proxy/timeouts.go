package proxy

import (
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/wire"
)

// sqlstateQueryCanceled is query_canceled, which a cancelled statement reports.
const sqlstateQueryCanceled = "57014"

// sqlstateIdleInTransactionTimeout is idle_in_transaction_session_timeout.
const sqlstateIdleInTransactionTimeout = "25P03"

// armQueryTimeout starts limits.query_timeout for the unit being relayed
// from be, which started as run number started (statementStarted): when it passes before the unit's replies have ended, the
// statement is cancelled on its node with a CancelRequest, as a client's
// own cancel would be, and the client gets the node's 57014. The caller
// stops the timer (nil without a limit) once the relay returns; a cancel already on its way holds
// the backend until the node has taken it (see waitForCancel), so it never
// reaches another session's statement. A timer that fires as the statement
// ends (Stop comes too late) acts only while that statement still runs
// (cancelIfStillRunning): not on the session's next one, nor on a unit PAUSE holds.
func (sess *session) armQueryTimeout(be *backend, started uint64) *time.Timer {
	sess.queryTimedOut.Store(false)
	limit := sess.srv.live().cfg.Limits.QueryTimeout
	if limit <= 0 {
		return nil
	}
	node := be.node
	return time.AfterFunc(limit, func() {
		sess.cancelIfStillRunning(started, func() {
			sess.queryTimedOut.Store(true)
			sess.log.Info().Str("node", node).Dur("limit", limit).Msg("statement ran past limits.query_timeout; cancelling it on its node")
		})
	})
}

// armIdleTransactionTimeout sets the client connection's read deadline
// before the session waits for the client's next message, while the session
// is inside a transaction: limits.idle_transaction_timeout. The loop clears
// it once a message has come.
func (sess *session) armIdleTransactionTimeout() {
	limit := sess.srv.live().cfg.Limits.IdleTransactionTimeout
	if limit <= 0 {
		return
	}
	// Only a wait for a new unit counts: the middle of an extended batch or
	// of a message is not idle.
	idle := sess.txState().inTransaction() && sess.client.r.Buffered() == 0 && len(sess.batch.msgs) == 0 && sess.skip == skipNone
	if idle {
		sess.client.conn.SetReadDeadline(time.Now().Add(limit))
		sess.idleTransactionDeadline = true
	}
}

// endIdleTransaction closes a session that stayed idle in a transaction
// past limits.idle_transaction_timeout, as PostgreSQL does: FATAL 25P03.
// The transaction is rolled back when the session's backends are released.
func (sess *session) endIdleTransaction() {
	sess.log.Info().Dur("limit", sess.srv.live().cfg.Limits.IdleTransactionTimeout).
		Msg("session idle in a transaction past limits.idle_transaction_timeout; closing it")
	sess.client.conn.SetDeadline(time.Now().Add(time.Second))
	sess.fail(&clientError{Severity: "FATAL", SQLState: sqlstateIdleInTransactionTimeout,
		Message: "pgowl: terminating connection due to idle-in-transaction timeout (limits.idle_transaction_timeout)"})
}

// queryTimeoutError is the ErrorResponse frame a client gets for a statement
// that limits.query_timeout cancelled, in place of the node's "canceling
// statement due to user request" (body): the same code, and a message that
// names the limit.
func (sess *session) queryTimeoutError(be *backend, body []byte) []byte {
	severity, _, message := errorSeverityFields(body)
	if severity == "" {
		severity = "ERROR"
	}
	frame, err := (&pgproto3.ErrorResponse{Severity: severity, SeverityUnlocalized: severity, Code: sqlstateQueryCanceled,
		Message: "pgowl: canceling statement due to limits.query_timeout (" + sess.srv.live().cfg.Limits.QueryTimeout.String() + ")",
		Detail:  "pgowl cancelled the statement on " + be.node + ", which answered: " + message}).Encode(sess.scratch[:0])
	if err != nil {
		return appendFrame(sess.scratch[:0], wire.MsgErrorResponse, body)
	}
	return frame
}
