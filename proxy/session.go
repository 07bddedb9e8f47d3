package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// session is one client connection after startup.
type session struct {
	srv *Server
	id  uint64
	// client is the client connection (client_conn.go).
	client clientConn
	log    zerolog.Logger

	// user, database and loginApplication are the login's (the application_name the node
	// reported at login), which the session's log lines and its history records carry: a name
	// the session sets later is a value of a statement, which no log shows.
	user, database, loginApplication string
	// appName is the session's application_name now: the login's, then what the node reported
	// it changed to (followApplicationName). Guards match it, and the admin side's list
	// of clients shows it; other goroutines read it too (Server.Clients): application() loads it.
	appName atomic.Pointer[string]
	login   pool.Login
	// serverParams are the ParameterStatus values the node gave at login. reported holds what
	// the client was told last of each (followParameterStatus), and reportedBefore the values
	// before the changes told since the session last stood outside a transaction block: when a
	// block's backend is lost, its changes are gone and the client is told the values again
	// (dropBackend), as the node would have told it at a ROLLBACK.
	serverParams   map[string]string
	reported       map[string]string
	reportedBefore map[string]string
	// parametersBeforeReady holds ParameterStatus frames for the client that go right before
	// pgowl's next ReadyForQuery (sendReady): those of a block pgowl aborted for a refusal
	// (abortBlockOn), which come after the refusal's ErrorResponse, as a node sends the settings
	// an error reverted after the error.
	parametersBeforeReady []byte

	// notice is the session's pgowl.notice setting: routing.notice until the session sets it
	// (noticeSetting; wantsNotice reads it).
	notice noticeSetting
	// maxLag is the session's pgowl.max_replica_lag (0: the configured one).
	maxLag time.Duration
	// maxCost is the session's pgowl.max_cost (0: the guards' own).
	maxCost float64
	// settings follows the session's settings, LOADs and the settings that
	// make it need the primary (settings_tracker.go).
	settings settingsTracker
	// sequencesDiscarded: in transaction pooling, the session ran DISCARD
	// SEQUENCES (or ALL) and has not run a unit on the primary since; the
	// next primary backend it gets discards its sequence state first.
	sequencesDiscarded bool
	// localPgowl says what the pgowl.* settings become when the transaction
	// block in which they changed ends; nil without such a change.
	localPgowl *pgowlTransaction

	// backends are the connections the session has now (backends.go).
	backends backendSet
	// held is the backend the session must stay on: an open transaction, an
	// extended batch not yet ended by Sync, or a pin.
	held *backend
	// pins are the session state that ties the session to held, if any,
	// and whether the node must be asked what remains (pins.go).
	pins sessionPins

	// statements are the client's prepared statements (statement_registry.go).
	statements statementRegistry

	// idleTransactionDeadline: the client connection has a read deadline,
	// limits.idle_transaction_timeout, because the session is idle inside a
	// transaction.
	idleTransactionDeadline bool

	batch batch
	// skip says whether the client's messages are dropped up to Sync (skip-until-Sync).
	skip syncSkip
	// deferred is a BEGIN pgowl answered and has not sent yet (deferbegin.go).
	deferred *deferredBegin

	// replyWait is the unit's wait for a node's first reply, which the
	// unresponsive-node watcher may interrupt (unresponsive.go).
	replyWait replyWait

	// queryTimedOut: limits.query_timeout cancelled the unit being relayed.
	queryTimedOut atomic.Bool

	running atomic.Pointer[runningStatement]
	// runs counts the starts and stops of running statements (statementStarted,
	// statementStopped): a limit's timer armed for one statement compares it, so
	// that it never cancels the next one, or a unit PAUSE holds, when it fires late.
	runs atomic.Uint64
	// idleOutsideTransaction is true while the session waits for a client
	// message outside a transaction: a shutdown may end it at once.
	idleOutsideTransaction atomic.Bool
	// busy is true from just before a unit looks at the pause gate (passGate;
	// false again while the gate holds it) until the session is back between
	// units with no work in flight: PAUSE waits for it.
	busy atomic.Bool
	// heldCancel is set while a unit waits at the pause gate: a cancel request takes it and
	// closes it, and the unit ends with 57014 without running (passGate).
	heldCancel atomic.Pointer[chan struct{}]
	// cancelling is held while a cancel request is passed on to the node
	// running the session's statement. A backend goes back to the pool only
	// when no cancel is in flight (see waitForCancel).
	cancelling sync.Mutex
	turn       uint64
	scratch    []byte
	// last describes the last routed unit, for SHOW pgowl.explain.
	last lastUnit
	// cls is the session's classification context (see classifier.go).
	cls classifierState
	// ryw is the WAL position the session's reads must see (readyourwrites.go).
	ryw readYourWrites
}

// runningStatement says where a client's statement is running, for cancel requests.
type runningStatement struct {
	node string
	// network and address reach the node (pool.Conn.Network, Address): TCP, or its Unix socket.
	network, address string
	pid              uint32
	secret           []byte
	// behindRead, when not nil, is closed once the session's catalogue read, which the
	// statement was sent behind on the same connection, has been read: until then the node
	// may be running the read, and a cancel request would cancel it instead of the statement
	// (passOnCancel waits for it). Set before the statement is published in session.running.
	behindRead chan struct{}
	// cancelAfterRead is set by passOnCancel when the read was not read within
	// cancelWaitsForCatalogueRead (held on the node, by a lock for example): the request was
	// passed on all the same and reached the read, so the session passes on another, for the
	// statement, once the read is read.
	cancelAfterRead atomic.Bool
}

// backend is one of the session's backend connections.
type backend struct {
	conn    *pool.Conn
	node    string
	role    route.Role
	running runningStatement

	expect    expectQueue
	openBatch bool // an extended batch was sent without its Sync
	skipping  bool // the node discards messages until Sync after an error
	broken    bool
	// dropped: dropBackend released the connection to the pool (broken); it is not released
	// again.
	dropped bool
	// portalSuspended: an Execute's reply on it was PortalSuspended in the open transaction, so
	// a portal (the unnamed one, most often) may wait for the client's next Execute, which a
	// simple Query pgowl ran there would destroy. The transaction's end clears it.
	portalSuspended bool
	// openReadOnly: with openBatch, everything sent since the last Sync only
	// read, outside any transaction block (see leaveReadOnlyBatch).
	openReadOnly bool
	// dirty: a unit may have discarded or deallocated state on the
	// connection that pgowl could not follow (DISCARD or DEALLOCATE in a
	// multi-statement string). The connection is reset with DISCARD ALL or
	// closed before another session gets it.
	dirty bool
}

func (sess *session) send(msg pgproto3.BackendMessage) error {
	buf, err := msg.Encode(sess.scratch[:0])
	if err != nil {
		return err
	}
	sess.scratch = buf[:0]
	return sess.client.write(buf)
}

// fail sends err to the client as an ErrorResponse and flushes.
func (sess *session) fail(err error) {
	sess.send(toErrorResponse(err))
	sess.client.w.Flush()
}

// sendReady ends a unit pgowl answered itself, with the status of the session's transaction state.
func (sess *session) sendReady() {
	if len(sess.parametersBeforeReady) > 0 {
		sess.client.write(sess.parametersBeforeReady)
		sess.parametersBeforeReady = sess.parametersBeforeReady[:0]
	}
	sess.send(&pgproto3.ReadyForQuery{TxStatus: sess.txState().readyStatus()})
}

// run reads client messages until the client leaves.
func (sess *session) run(ctx context.Context) {
	defer sess.closeBackends()
	for {
		if sess.client.r.Buffered() == 0 && sess.client.w.Buffered() > 0 {
			if err := sess.client.w.Flush(); err != nil {
				return
			}
		}
		// Set before the drain is checked: the drain sets its flag before it
		// looks for idle sessions, so one of the two sees the other.
		state := sess.txState()
		sess.idleOutsideTransaction.Store(!state.inTransaction() && !state.workInFlight())
		sess.busy.Store(state.workInFlight())
		if sess.endForShutdown() {
			return
		}
		if !sess.awaitClientOrRead() {
			continue
		}
		idle := sess.startIdleRelay()
		sess.armIdleTransactionTimeout()
		typ, body, err := sess.client.r.ReadFrame()
		sess.idleOutsideTransaction.Store(false)
		if idle != nil {
			idle.stop()
		}
		if err != nil && sess.srv.shutdown.draining.Load() && isTimeout(err) {
			if sess.endForShutdown() {
				return
			}
			// Woken while a transaction was starting: it may finish.
			sess.client.conn.SetReadDeadline(time.Time{})
			continue
		}
		if err != nil {
			if sess.idleTransactionDeadline && errors.Is(err, os.ErrDeadlineExceeded) {
				sess.endIdleTransaction()
				return
			}
			if errors.Is(err, wire.ErrMessageTooLarge) {
				sess.fail(protocolViolation("%v (limits.max_message_size)", err))
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				sess.log.Debug().Err(err).Msg("client read failed")
			}
			return
		}
		if sess.idleTransactionDeadline {
			// Not idle any more: what the unit reads from the client (COPY data) is not bound.
			sess.client.conn.SetReadDeadline(time.Time{})
			sess.idleTransactionDeadline = false
		}
		if sess.skip != skipNone && typ != wire.MsgSync && typ != wire.MsgTerminate {
			if !frontendMessage(typ) {
				// A server skipping to Sync still reads each message's type.
				sess.fail(protocolViolation("invalid frontend message type %q", typ))
				return
			}
			continue
		}
		switch typ {
		case wire.MsgQuery:
			if err := sess.simpleQuery(ctx, body); err != nil {
				sess.log.Debug().Err(err).Msg("session ends")
				return
			}
		case wire.MsgParse, wire.MsgBind, wire.MsgDescribe, wire.MsgExecute, wire.MsgClose:
			if err := sess.batch.add(sess, typ, body); err != nil {
				var refusal batchRefusal
				if errors.As(err, &refusal) {
					cerr := refusal.clientError()
					sess.failTransactionForRefusal(cerr.SQLState)
					sess.refuseInBatch(cerr)
					continue
				}
				sess.fail(protocolViolation("invalid %q message: %v", typ, err))
				return
			}
			if len(sess.batch.buf) > maxBatchBytes {
				if err := sess.runBatch(ctx, false); err != nil {
					return
				}
			}
		case wire.MsgFlush:
			if err := sess.runBatch(ctx, false); err != nil {
				return
			}
		case wire.MsgSync:
			if skip := sess.skip; skip != skipNone {
				sess.skip = skipNone
				sess.batch.reset()
				if skip != skipToNodeSync {
					sess.sendReady()
					continue
				}
				// The node holds the start of the refused segment: its Sync ends it there.
			}
			sess.batch.addSync()
			if err := sess.runBatch(ctx, true); err != nil {
				return
			}
		case wire.MsgFunctionCall:
			if err := sess.functionCall(ctx, body); err != nil {
				return
			}
		case wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail:
			// Copy messages outside COPY are ignored, as the server does.
		case wire.MsgTerminate:
			return
		default:
			sess.fail(protocolViolation("invalid frontend message type %q", typ))
			return
		}
	}
}

// frontendMessage reports whether typ is the type of a message a client may send after its login.
func frontendMessage(typ byte) bool {
	switch typ {
	case wire.MsgQuery, wire.MsgParse, wire.MsgBind, wire.MsgDescribe, wire.MsgExecute, wire.MsgClose,
		wire.MsgFlush, wire.MsgSync, wire.MsgFunctionCall, wire.MsgCopyData, wire.MsgCopyDone,
		wire.MsgCopyFail, wire.MsgTerminate:
		return true
	}
	return false
}

// endRefused ends a unit that pgowl answered with an error instead of a
// node: when the client's unit ends with ReadyForQuery (a Query, or a batch
// up to Sync) pgowl sends one, with the transaction state's status;
// otherwise the rest of the segment is skipped until the client's Sync
// (skipToSync), as a node skips it after an error.
func (sess *session) endRefused(expectsReady bool) {
	if expectsReady {
		sess.sendReady()
		return
	}
	sess.skip = skipToSync
}

// refuseInBatch answers a message of an extended batch that pgowl refuses
// itself with err, and skips the rest of the segment until Sync, as a node
// does after an error. The batch's earlier messages, not sent yet, are
// dropped with it: nothing of the segment runs.
func (sess *session) refuseInBatch(err *clientError) {
	sess.batch.reset()
	sess.send(toErrorResponse(err))
	sess.skip = skipToSync
	if sess.held != nil && sess.held.openBatch {
		sess.skip = skipToNodeSync
	}
	sess.log.Info().Str("sqlstate", err.SQLState).Str("error", err.Message).Msg("message refused")
}

// maxBatchBytes bounds how much of an extended batch is held before it is sent.
const maxBatchBytes = 1 << 20

// simpleQuery runs one Query message as a routed unit.
func (sess *session) simpleQuery(ctx context.Context, body []byte) error {
	sql, _, err := cstring(body)
	if err != nil {
		sess.fail(protocolViolation("invalid Query message"))
		return err
	}
	if len(sess.batch.msgs) > 0 {
		// Extended messages without Sync before a Query: send them first.
		if err := sess.runBatch(ctx, false); err != nil {
			return err
		}
	}
	eff := sess.classify(sql, nil)
	if eff.Pgowl != nil {
		sess.answerPgowl(eff.Pgowl, false)
		sess.sendReady()
		return nil
	}
	if name, ok := deallocatedName(eff); ok && sess.statements.lookup(name) != nil && !sess.txState().failed() {
		sess.deallocateClientStatement(name)
		return nil
	} else if ok && sess.foreignStatement(name, nil) {
		// Another session's statement, by the managed name pg_prepared_statements shows.
		foreign := &foreignStatementError{name: name}
		sess.failTransactionForRefusal(sqlstateInvalidSQLStatementName)
		sess.send(toErrorResponse(foreign.clientError()))
		sess.endRefused(true)
		sess.log.Info().Str("statement", name).Msg("DEALLOCATE of a statement the session did not prepare refused")
		return nil
	}
	if refused := sess.sqlStatementNamesRefused(&eff); refused != nil {
		// Nothing of the string runs: its statements would have run up to this one.
		cerr := refused.clientError()
		sess.failTransactionForRefusal(cerr.SQLState)
		sess.send(toErrorResponse(cerr))
		sess.endRefused(true)
		sess.log.Info().Str("statement", refused.name).Msg("SQL statement naming a prepared statement under pgowl's reserved prefix refused")
		return nil
	}
	switch arrival := sess.planArrival(eff); arrival {
	case route.ArriveRoute:
	case route.ArriveDeferBegin:
		sess.deferBegin(body, sql, eff)
		return nil
	default:
		sess.answerInDeferred(arrival)
		return nil
	}
	u := unit{start: time.Now(), effects: eff, sql: sql, expectsReady: true}
	if eff.Statements == 1 {
		u.setSQL = sql
		u.endsNoTransaction = sess.endsNoTransaction(eff)
	}
	return sess.routeAndRun(ctx, &u, func(be *backend) {
		be.conn.WriteQueryBody(body)
		be.expect.push(expectation{typ: wire.MsgQuery})
		// A simple Query replaces the unnamed statement, for the client too.
		sess.statements.forgetUnnamed()
	})
}

// functionCall forwards a fastpath FunctionCall; its effect cannot be known.
func (sess *session) functionCall(ctx context.Context, body []byte) error {
	if len(sess.batch.msgs) > 0 {
		// Extended messages without Sync before the call: they run first, as on a node.
		if err := sess.runBatch(ctx, false); err != nil {
			return err
		}
	}
	u := unit{start: time.Now(), sql: "<function call>", expectsReady: true, effects: classify.Effects{
		Access: classify.Write, Reason: classify.ReasonUnknownEffect, Subject: "fastpath function call", Statements: 1}}
	if arrival := sess.planArrival(u.effects); arrival != route.ArriveRoute {
		sess.answerInDeferred(arrival) // a failed deferred transaction refuses it
		return nil
	}
	return sess.routeAndRun(ctx, &u, func(be *backend) {
		be.conn.Writer.Write(wire.AppendFrame(sess.scratch[:0], wire.MsgFunctionCall, body))
		be.expect.push(expectation{typ: wire.MsgFunctionCall})
	})
}

// refuseCancelledWhileHeld answers a unit whose client cancelled it while PAUSE held it: 57014, as
// for a statement cancelled on its node, and nothing ran. Inside a deferred transaction the
// transaction fails, as a cancel fails it on a node.
func (sess *session) refuseCancelledWhileHeld(u *unit) {
	cancelled := &clientError{SQLState: sqlstateQueryCanceled, Message: "canceling statement due to user request",
		Detail: "pgowl held the statement while paused (PAUSE in the admin console); it did not run."}
	if sess.deferred != nil {
		sess.deferred.aborted = true
	}
	sess.send(toErrorResponse(cancelled))
	sess.endRefused(u.expectsReady)
	u.routeErr = cancelled
	sess.logUnit(u, route.Decision{}, errorCode(cancelled))
}

// maxAttempts bounds how often a unit is sent again after its backend turned
// out to be dead before any reply reached the client.
const maxAttempts = 3

// routeAndRun chooses the node for u, writes the unit to the session's
// backend there with write, and relays the replies. A backend that turns out
// to be dead (the node restarted, or closed an idle connection) before any
// reply reached the client is replaced and the unit sent again, unless the
// session was inside a transaction there: then the client is told.
func (sess *session) routeAndRun(ctx context.Context, u *unit, write func(*backend)) error {
	// takenOff: an earlier attempt was taken off a node that stopped
	// answering; if no node can take the unit now, the client learns that.
	var takenOff *nodeUnresponsive
	if !sess.txState().workInFlight() {
		// A unit that starts new work waits while pgowl is paused, and is
		// then routed by the node states of the moment it is released.
		if err := sess.passGate(ctx); err != nil {
			if errors.Is(err, errCancelledWhileHeld) {
				sess.refuseCancelledWhileHeld(u)
				return nil
			}
			return err
		}
		if sess.srv.shutdown.draining.Load() && sess.endForShutdown() {
			// Released by the drain: outside a transaction the session ends here, as at its
			// next message (a deferred transaction's unit runs, as transactions may finish).
			return errEndedForShutdown
		}
	}
	sess.busy.Store(true)
	sess.routeAheadOfRead(u)
	if sess.cls.aheadUnit == u {
		defer sess.forgetAheadUnit(u) // when it was not sent after all
	}
	u.guard = unitGuard{cfg: sess.guardFor(u)}
	for attempt := 1; ; attempt++ {
		be, plan, err := sess.choose(ctx, u)
		if sess.cls.aheadUnit == u && plan.Resend == route.ResendRead {
			// Planned on provisional effects: the unit may write (a view that runs a
			// writing function reads as a table without the catalogue).
			plan.Resend = route.ResendIfNotRun
		}
		// Whether the deferred BEGIN goes with the unit is the plan's word
		// (a synced batch that only prepares runs outside it).
		u.carriesBegin = plan.CarriesBegin
		dec := plan.Decision
		var abandoned *pool.AbandonedError
		if errors.As(err, &abandoned) {
			// Nothing of the unit was sent (the zero Failure): the plan's rule says whether it may go again.
			if attempt < maxAttempts && plan.Resend.Allows(route.Failure{}) {
				sess.log.Info().Str("node", abandoned.Node).Int("attempt", attempt).Msg("gave up a new connection to a node that stopped answering; routing the statement again")
				continue
			}
			err = &clientError{SQLState: sqlstateConnectionFailure, Message: "pgowl: " + abandoned.Error(),
				Hint: "This condition is transient: retry shortly."}
		}
		if err != nil && takenOff != nil {
			err = &clientError{SQLState: sqlstateConnectionFailure,
				Message: "pgowl: lost the connection to " + takenOff.node + " while it ran this statement, and no other node can run it",
				Detail:  takenOff.Error() + "; " + err.Error(),
				Hint:    "This condition is transient: retry shortly."}
		}
		if err != nil {
			if u.carriesBegin || (u.prepareOnly && sess.deferred != nil) {
				// The transaction's first statement, or a prepare run outside
				// it, found no node: the transaction fails, as it would have on
				// a node.
				sess.deferred.aborted = true
			}
			err = statementLoginRefusal(err, dec.Node)
			sess.send(toErrorResponse(err))
			sess.endRefused(u.expectsReady)
			u.routeErr = err
			sess.logUnit(u, dec, errorCode(err))
			return nil
		}
		if u.carriesBegin {
			// BEGIN's NOTICE and log tell the plan's decision for the
			// transaction; the statement runs inside it.
			u.beginDecision, u.beginFollowsStatement = plan.Begin, plan.BeginFollowsStatement
		}
		u.decision = dec
		if refusal, cerr := sess.checkCost(be, u); cerr != nil {
			if attempt < maxAttempts && plan.Resend.Allows(route.Failure{}) { // the unit was not sent
				sess.srv.opts.Pool.Suspect(be.node)
				sess.dropBackend(be)
				continue
			}
			return sess.lostBackend(be, u, dec, cerr)
		} else if refusal != nil {
			sess.refuseForCost(be, u, dec, refusal)
			return nil
		}
		out, sent, err := sess.exchangeOn(be, u, dec, write)
		// A unit sent ahead of its session's catalogue read was planned again for its reason.
		dec = u.decision
		if err == nil {
			sess.applyOutcome(be, u, dec, out)
			return nil
		}
		if clientSide(err) {
			sess.logUnit(u, dec, sqlstateConnectionFailure)
			return err
		}
		if attempt < maxAttempts && plan.Resend.Allows(sendFailure(err, sent, u.forwarded)) {
			sess.log.Info().Err(err).Str("node", be.node).Int("attempt", attempt).Msg("backend connection was dead before the statement ran; sending it on a fresh one")
			// A restart or a crash closes all the node's connections at
			// once: the pool checks its other idle ones before handing them out.
			sess.srv.opts.Pool.Suspect(be.node)
			sess.dropBackend(be)
			errors.As(err, &takenOff)
			continue
		}
		return sess.lostBackend(be, u, dec, err)
	}
}

// exchangeOn runs the unit on be, the backend chosen for it by dec: it
// prepares the connection, writes the unit with write (behind a deferred
// BEGIN or a failed transaction's replay, and ahead of a catalogue read),
// and relays the replies. sent says the unit's request reached the kernel:
// the node may have run it. The outcome is for the session's parts to apply
// (applyOutcome); on an error it is partial and not applied.
func (sess *session) exchangeOn(be *backend, u *unit, dec route.Decision, write func(*backend)) (out exchangeOutcome, sent bool, err error) {
	// The NOTICE says where a statement ran: a unit that runs nothing
	// (prepare and describe only) gets none.
	u.noticePending = sess.wantsNotice() && !u.runsNothing
	sess.awaitFirstReply(be)
	err = sess.prepareBackend(be)
	if err == nil && sess.sequencesDiscarded && dec.Role == route.RolePrimary {
		err = sess.discardSequencesOn(be)
	}
	if err == nil {
		if u.carriesBegin {
			sess.writeDeferredBegin(be)
		} else if u.replaysFailure {
			sess.writeFailedTransaction(be)
		}
		sess.guardStarted(u, be)
		write(be)
		beforeParse := sess.cls.sendsBeforeParse(u)
		if !beforeParse {
			sess.sendCatalogueRead(be, u, dec.Role)
		}
		be.running.behindRead = nil
		be.running.cancelAfterRead.Store(false)
		// The read at the head of be's replies is one sent before u (u's own goes behind u).
		if sess.cls.readOn == be && be.expect.front().catalogueRead != nil {
			be.running.behindRead = make(chan struct{}) // closed by drainCatalogueRead
		}
		started := sess.statementStarted(be)
		err = be.conn.Writer.Flush()
		if err == nil {
			sent = true
			sess.sentAheadOfRead(u, be)
			if beforeParse {
				err = sess.parsedOnceSent(be, u, dec.Role)
			}
		}
		if err == nil {
			sess.prepareCreatedWhileItRuns()
			if sess.labelsRead() {
				u.effects.Label() // for the NOTICE's log line, while the node runs u
			}
			timeout := sess.armQueryTimeout(be, started)
			out, err = sess.relay(be, u)
			if timeout != nil {
				timeout.Stop()
			}
		}
		sess.statementStopped()
		sess.guardEnded(u)
	}
	if sess.endAwait(err, be) && err != nil {
		err = &nodeUnresponsive{node: be.node, limit: sess.srv.live().cfg.Limits.FirstReplyTimeout, cause: err}
	}
	return out, sent, err
}

// lostBackend reports a backend that failed while running a unit. The client
// gets an error and can go on with its next statement on the current roles.
func (sess *session) lostBackend(be *backend, u *unit, dec route.Decision, cause error) error {
	listening := sess.held == be && sess.pins.has(classify.SessionListen)
	sess.cls.forgetCreated() // whether the unit made it is not known: the change is read
	sess.dropBackend(be)
	if listening {
		// The LISTEN is gone with the backend, and nothing would tell the
		// client that notifications stopped: end the session, as when
		// the loss happens while it is idle (see idleRelay).
		sess.log.Warn().Err(cause).Str("node", be.node).Msg("listening session ended: its backend was lost while it ran a statement")
		sess.startReply(u)
		sess.terminateListening("pgowl: terminating connection: the connection to " + be.node + ", where this session listens, was lost while it ran a statement")
		sess.logUnit(u, dec, sqlstateAdminShutdown)
		return errListeningSessionLost
	}
	if u.carriesBegin || u.replaysFailure {
		sess.deferred = nil // the transaction is gone with the backend, as the hint says
	} else if u.prepareOnly && sess.deferred != nil {
		// A prepare run outside the deferred transaction failed: the transaction
		// fails, as it would have on a node.
		sess.deferred.aborted = true
	}
	sess.log.Warn().Err(cause).Str("node", be.node).Msg("backend connection lost")
	sess.startReply(u)
	sess.send(toErrorResponse(&clientError{SQLState: sqlstateConnectionFailure,
		Message: "pgowl: lost the connection to " + be.node + " while it ran this statement",
		Detail:  cause.Error(),
		Hint:    "Any open transaction on " + be.node + " is gone. Retry the transaction; it will run on the current roles."}))
	sess.batch.reset()
	sess.endRefused(u.expectsReady)
	sess.logUnit(u, dec, sqlstateConnectionFailure)
	return nil
}

// applyOutcome applies what a unit's exchange with be did (out) to the
// session's parts, once the relay has returned: the unit records its
// outcome, then the deferred BEGIN ends (it went with the unit) or fails (a
// batch outside it failed), the
// sequences discard is settled, the write is noted (noteWrite), the
// statements, settings, pins and held backend follow (afterUnit), the write
// position announced in user scope is read, an idle backend goes back to the
// pool, and the routing log is written. The write is noted before afterUnit's
// follow-ups on the node (a settings read back, a pin check): in user scope
// its position is announced before the client has its ReadyForQuery, so the
// follow-ups need not keep the client waiting (flushBeforeFollowUp), and a
// follow-up that loses the backend does not lose the write with it.
func (sess *session) applyOutcome(be *backend, u *unit, dec route.Decision, out exchangeOutcome) {
	u.outcome = out
	sess.abortDeferredAfter(u, &out)
	if u.carriesBegin || u.replaysFailure {
		sess.deferred = nil
	}
	if sess.sequencesDiscarded && dec.Role == route.RolePrimary && !out.failed() && !u.runsNothing {
		// What currval and lastval answer on this backend now, the session's own unit did.
		sess.sequencesDiscarded = false
	}
	announced := sess.noteWrite(be, u, dec)
	sess.afterUnit(be, u)
	sess.readAnnouncedPosition(be, announced)
	sess.releaseIdle(be)
	sess.logUnit(u, dec, u.outcome.logOutcome())
}

// afterUnit applies the unit's outcome (u.outcome) to the session's
// statements, settings, pins and held backend, in that order.
func (sess *session) afterUnit(be *backend, u *unit) {
	out := &u.outcome
	status := out.txStatus
	if out.errCode == sqlstateCachedPlanChanged {
		// A table changed under a managed statement: sessions that prepare
		// it again get a fresh one (the client's current one fails on, as
		// it would on its own connection, until the client prepares again).
		for _, st := range u.stmts {
			sess.srv.statementNames.retire(st)
		}
	}
	if status == wire.TxIdle && !u.runsNothing && (sess.cls.changeRan || u.effects.CatalogueChange) {
		// The change's transaction ended with this unit: whether it committed decides whether
		// other sessions' reads must wait for it (definition_changes.go).
		committed := !out.failed()
		if u.effects.Tx != classify.TxNone {
			committed = out.committed
		}
		sess.cls.rolledBack = !committed
	}
	if u.effects.CatalogueChange && !u.runsNothing {
		if out.failed() {
			sess.cls.forgetCreated() // nothing was made
		}
		sess.catalogueChangeRan(status)
	} else if st := &sess.cls; st.changeRan && status == wire.TxIdle && !u.runsNothing && sess.idleForCatalogue() && !st.changeToTakeIn() {
		// The transaction block that made the change ended here (COMMIT, ROLLBACK, an error):
		// told now rather than at the session's next statement, so that other sessions plan
		// with it, and hold their reads of it (definition_changes.go), from now on.
		st.tellChanges(sess.srv.opts.Classifier, sess.srv.definitions)
	}
	// A savepoint statement moves the settings changed in the block back or
	// forth; then the settings of a transaction that committed: the unit's
	// own effects may then mark the connection's settings unknown.
	savepointFollowed := false
	if status != wire.TxIdle && u.effects.Statements == 1 && !u.runsNothing && !out.failed() {
		savepointFollowed = sess.settings.followSavepoint(u.effects.Transaction)
		sess.followSavepoint(u.effects.Transaction)
	}
	sess.settlePendingSets(be, u, savepointFollowed)
	if status != wire.TxIdle && u.effects.Statements == 1 && u.setSQL != "" && !u.runsNothing && !out.failed() &&
		u.effects.SearchPath != nil && u.effects.SearchPath.Local && len(u.effects.Settings) == 1 && u.effects.Settings[0].Local {
		// SET LOCAL search_path: the block's later statements resolve names (and create
		// unqualified objects) on it, until the block ends.
		sess.settings.addLocal(u.setSQL)
	}
	if status == wire.TxIdle {
		sess.reportedBefore = nil // outside a block: what the client was told stands
		sess.endPgowlTransaction(out.committed)
		sess.settings.endBlock()
		be.portalSuspended = false // the transaction's end closed every portal
	} else if !u.runsNothing && u.effects.EndsBlock {
		// A block ended and the next began within the unit (AND CHAIN, COMMIT; BEGIN): the
		// savepoints recorded in the old one are gone, so that a ROLLBACK TO a namesake set in
		// the new one unseen (in a multi-statement string) is not matched to them. What the
		// client was told in the block that ended stands (a loss of the new one keeps it).
		sess.settings.endBlock()
		sess.reportedBefore = nil
	}
	if !u.runsNothing {
		sess.settings.noteNames(u.effects.SetConfigNames)
	}
	tracking := sessionEffectsTracking(u, out, be.openBatch)
	switch tracking {
	case trackUncertain:
		sess.trackUncertainEffects(be, u)
	case trackExact:
		sess.trackSessionEffects(be, u)
	}
	if load, ok := loadStatement(u); ok {
		sess.noteLoad(be, load)
	}
	if discardsSequences(u) {
		sess.discardSequencesElsewhere(be)
		// In transaction pooling the state may be on any pooled backend of
		// the primary: the next one the session runs on there discards it.
		sess.sequencesDiscarded = sess.srv.transactionPooling
	}
	if u.effects.Session&classify.SessionUnknown != 0 && !u.runsNothing && !sess.pins.has(classify.SessionPrepare) {
		// A DO block or a procedure pgowl cannot read may have called
		// set_config unseen. (EXECUTE runs only where its PREPARE pinned the
		// session; the settings count as unknown when that pin ends.)
		sess.settingsChangedUnseen(be)
	}
	sess.followSearchPathUnseen(be, u, unitSettled{status: status, tracking: tracking, savepointFollowed: savepointFollowed})
	sess.readSettingsBackIfDue(be)
	if status == wire.TxIdle && !be.openBatch && !sess.settings.readBackDue {
		// Between transactions the session's path is the one it recorded (or read back).
		sess.settings.searchPathUnsure = false
	}
	sess.pins.noteUnit(u, status)
	if sess.pins.recheckDue() {
		sess.recheckPins(be)
	}
	if be.broken {
		// A follow-up lost it (dropped): what the unit took there (a lock, a temporary table) is
		// gone with it, and the session does not hold a connection that is gone.
		if sess.held == nil {
			sess.pins.lost()
		}
		return
	}
	if holdsBackend(sess.pins.pinned(), be.openBatch, status) {
		sess.held = be
	} else {
		sess.held = nil
	}
}

// settlePendingSets decides the fate of SETs made inside a transaction once
// the unit that ends it (or chains it, or rolls back to a savepoint) has run
// (settleFate): they join the session's settings when the transaction
// committed, and are dropped when it rolled back. When pgowl cannot tell
// which of them survived, the backend's settings count as unknown (RESET
// ALL before its next unit) and the SETs are dropped.
func (sess *session) settlePendingSets(be *backend, u *unit, savepointFollowed bool) {
	if !sess.settings.hasPending() {
		return
	}
	fate, committed := settleFate(u.effects, &u.outcome, savepointFollowed)
	if fate == pendingSettled {
		u.outcome.committed = committed
	}
	switch committedSets, unknown := sess.settings.settlePending(fate, committed); {
	case unknown:
		*be.settings() = connSettings{state: settingsUnknown}
		sess.log.Warn().Msg("settings changed in a transaction that pgowl could not follow (ROLLBACK TO a savepoint set in a multi-statement string, or such a string that ended the transaction); they are not carried to the session's other nodes")
	case len(committedSets) > 0:
		sess.applySets(be, committedSets)
	}
}

// pinningEffects are the session effects whose state cannot move between nodes.
const pinningEffects = classify.SessionListen | classify.SessionTempTable | classify.SessionHoldCursor |
	classify.SessionAdvisoryLock | classify.SessionSetRole | classify.SessionPrepare | classify.SessionSerializableDefault

// trackSessionEffects follows what a successful unit did to session state:
// pins taken and released, settings changed, statements discarded.
func (sess *session) trackSessionEffects(be *backend, u *unit) {
	eff := u.effects
	sql := u.setSQL
	if sess.pins.take(eff.Session) != 0 {
		sess.log.Info().Str("node", be.node).Str("pinned_by", describePin(sess.pins.kinds)).Msg("session pinned to node")
	}
	switch {
	case eff.Session&classify.SessionDiscardAll != 0:
		if released := sess.pins.releaseAll(); released != 0 {
			sess.log.Info().Str("node", be.node).Str("released", describePin(released)).Msg("session pin released")
		}
		sess.settings.discardAll()
		sess.forgetStatements(be)
		be.reset()
	case eff.Session&classify.SessionDeallocateAll != 0:
		sess.forgetStatements(be)
	}
	if eff.Session&classify.SessionSet != 0 && eff.Session&classify.SessionDiscard == 0 {
		replay, name := "", ""
		if eff.Statements == 1 && sql != "" {
			replay, name = settingReplay(eff, sql)
		}
		if name != "" && be.conn.TxStatus == wire.TxIdle {
			// set_config with a parameter: carry the value it set.
			value, ok, err := sess.readSetting(be, name)
			if err != nil {
				sess.dropBackend(be)
				return
			}
			if ok {
				replay = setConfigReplay(name, value)
			}
		}
		switch {
		case replay == "":
			sess.settingsChangedUnseen(be)
		case be.conn.TxStatus == wire.TxIdle:
			sess.applySets(be, []string{replay})
		default:
			sess.settings.addPending(replay)
		}
	}
}

// trackUncertainEffects follows a unit whose session effects pgowl cannot
// follow statement by statement, so that nothing it left on the connection
// reaches another session: every pin it may have taken is taken (and none
// released), settings it may have changed make the connection's settings
// unknown (the next unit on it starts with RESET ALL), and a DISCARD or
// DEALLOCATE makes its statements unknown (it is reset or closed before
// another session gets it).
func (sess *session) trackUncertainEffects(be *backend, u *unit) {
	eff := u.effects
	if sess.pins.take(eff.Session) != 0 {
		sess.log.Info().Str("node", be.node).Str("pinned_by", describePin(sess.pins.kinds)).Msg("session pinned to node")
	}
	switch {
	case eff.Session&classify.SessionSet != 0 && eff.Session&classify.SessionDiscard == 0:
		sess.settingsChangedUnseen(be)
	case eff.Session&classify.SessionDiscard != 0:
		sess.log.Warn().Msg("a DISCARD ran inside a multi-statement string or a failed unit; the connection's settings are reset before its next use")
		*be.settings() = connSettings{state: settingsUnknown}
	}
	if eff.Session&(classify.SessionDiscard|classify.SessionDeallocate) != 0 {
		be.dirty = true
	}
}

// sqlstateCachedPlanChanged is feature_not_supported, which PostgreSQL reports
// for "cached plan must not change result type".
const sqlstateCachedPlanChanged = "0A000"

// applySets records settings changes that took effect on be (see
// settingsTracker.apply), and marks be as carrying the session's settings.
func (sess *session) applySets(be *backend, sets []string) {
	sess.settings.apply(sess.srv.opts.Classifier, sets)
	// (A connection that holds what pgowl cannot name stays unknown: it is reset before
	// its next use; one the session owns stays its own.)
	be.settings().follow(sess.settings.key)
}

// forgetStatements follows DISCARD ALL / DEALLOCATE ALL on be: no statement
// survives, neither the client's nor the connection's.
func (sess *session) forgetStatements(be *backend) {
	sess.statements.forgetAll()
	be.forgetPrepared()
}

// writeNotice sends the routing NOTICE for a unit, if the session wants it.
func (sess *session) writeNotice(dec route.Decision, guard *unitGuard) {
	if !sess.wantsNotice() {
		return
	}
	// The frame is built in the session's scratch buffer: a NoticeResponse
	// with severity NOTICE, code 00000, the message and the detail.
	buf := append(sess.scratch[:0], wire.MsgNoticeResponse, 0, 0, 0, 0)
	buf = append(buf, noticeFieldsHead...)
	buf = dec.AppendNoticeMessage(buf, sess.effectiveMaxLag())
	buf = append(buf, 0, 'D')
	buf = dec.AppendNoticeDetail(buf)
	buf = guard.appendNotice(buf)
	buf = append(buf, 0, 0)
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(buf)-1))
	sess.scratch = buf[:0]
	sess.client.w.Write(buf)
}

// noticeFieldsHead is the start of a routing NOTICE's fields, up to the
// message's field type.
const noticeFieldsHead = "SNOTICE\x00VNOTICE\x00C00000\x00M"

func (sess *session) effectiveMaxLag() time.Duration {
	lag := sess.srv.live().policy.MaxReplicaLag
	if sess.maxLag > 0 && sess.maxLag < lag {
		lag = sess.maxLag
	}
	return lag
}
