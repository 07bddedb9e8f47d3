// Package pgowlclient is the client side of pgowl's contract, for
// applications and AI agents that send SQL through pgowl with pgx (Client)
// or database/sql over pgx's stdlib driver (DB).
//
// # Refusals
//
// pgowl refuses a statement with an ErrorResponse whose message begins
// "pgowl: <CODE>:" and whose SQLSTATE goes with the code. AsRefusal
// recognises one by both together, never by the text alone, and says what
// kind it is:
//
//   - Transient: NO_READABLE_REPLICA, REPLICA_LAG_EXCEEDED, NO_PRIMARY
//     (57P03) and DATABASE_BUSY (53300). Nothing ran; the same SQL may
//     succeed later.
//   - Fixable: QUERY_COST_EXCEEDED (54001). The statement's plan is too
//     expensive for the guard that matched it; the same SQL fails again.
//     Refusal.Cost holds the plan nodes carrying the cost, parsed from the
//     DETAIL (ParseCostDetail documents its format).
//   - TransactionLost: PRIMARY_REPLACED (08006, "pgowl: <node> is no longer
//     the primary ..."). The session's transaction, or the state that
//     pinned it, was on a node that is no longer the primary and is gone.
//
// pgowl's other 08006, "lost the connection to <node>", is not a refusal: the
// statement may have run, so it is returned as it is.
//
// # The retry rule
//
// A statement is sent again by itself only when all of these hold: its
// refusal is Transient; the connection is outside a transaction after the
// refusal (ReadyForQuery said 'I'); and no row has been handed to the
// caller. A statement inside an explicit transaction cannot be retried alone:
// the statements before it are part of what it means, and the refusal may
// have ended the transaction. There only the whole transaction can be run
// again, from BEGIN, which is what RunTx does with a function the caller
// gives it: it retries after a Transient refusal and after PRIMARY_REPLACED
// (whose rolled-back transaction is exactly the one the function rebuilds).
// A Fixable refusal is never retried, at either level.
//
// Retries wait growing, jittered intervals (Backoff) within the caller's
// budget: the context's deadline and Backoff.MaxAttempts. When the budget
// ends the last refusal is returned inside a *BudgetError.
//
// # Routes
//
// pgowl sends a NOTICE before each routed unit's first reply; its DETAIL
// begins "node=<name> role=<role> reason=<CODE> lag_ms=<n>" and may carry
// more key=value fields. Every call returns a Result with the Route of its
// statement (every Route, for a transaction), so that a caller can store
// where and why its SQL ran. A NoticeRecorder attributes NOTICEs to
// statements by connection and time window: a statement's window on its
// connection opens before it is sent and closes once its ReadyForQuery has
// been read, and a connection runs one statement at a time, so a NOTICE that
// arrives inside the window is that statement's. The recorder must be
// installed in the configuration before connections are made: the
// constructors here do it, and NoticeRecorder.Install / StdlibOption serve
// callers that build their own.
//
// # Limits
//
// pgx batches and pipelines, CopyFrom, and statements sent on the
// connection directly (not through Client or DB) are neither retried nor
// given routes. With SET pgowl.notice = off, Result.Routed is false.
package pgowlclient
