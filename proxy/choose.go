package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// unit is one routed unit: a simple Query or an extended batch.
type unit struct {
	start   time.Time
	effects classify.Effects
	// decideTime is from start to the node being chosen, without waits (for metrics).
	decideTime time.Duration
	sql        string // for the log's ai marker; never logged raw
	// setSQL is the statement to replay on other nodes when the unit changed a setting.
	setSQL string
	// stmts are the prepared statements of an extended batch (nil for a simple Query).
	stmts []*preparedStmt
	// expectsReady says the unit ends with ReadyForQuery (Query or Sync).
	expectsReady bool

	// outcome is what the unit's exchange with its node did: the relay's
	// result, recorded by applyOutcome before the session's parts apply it.
	outcome exchangeOutcome

	decision      route.Decision
	routeErr      error // why no node could run the unit
	noticePending bool  // the routing NOTICE is still to be sent
	forwarded     bool  // some reply of the unit reached the client's buffer
	runsNothing   bool  // only Parse/Describe/Close: no statement runs
	// prepareOnly: a synced batch outside a transaction that runs nothing;
	// any node may serve a read's, the primary a write's (route.ShapePrepareOnly).
	prepareOnly bool
	// endsNoTransaction: a lone COMMIT or ROLLBACK while the session has no
	// transaction anywhere; any node may answer it (route.ShapeEndsNoTransaction).
	endsNoTransaction bool
	carriesBegin      bool           // the session's deferred BEGIN is sent ahead of the unit
	beginDecision     route.Decision // with carriesBegin: the decision as BEGIN reports it
	beginReported     bool           // BEGIN's NOTICE was written
	beginLogged       bool           // BEGIN's routing-log line was written
	// beginFollowsStatement: with carriesBegin, a READ ONLY transaction went
	// where its first statement had to run (the primary), not where BEGIN
	// READ ONLY alone would have gone.
	beginFollowsStatement bool
	// replaysFailure: the unit ends a failed deferred transaction; a failed
	// transaction is opened on the node first (see failedTransactionQuery).
	replaysFailure bool
	// guard is the unit's guard and its cost verdict (see costguard.go).
	guard unitGuard
}

func (u *unit) failed() bool { return u.outcome.failed() }

// planStatement maps a classification to the router's statement.
func planStatement(eff classify.Effects) route.Statement {
	st := route.Statement{Access: route.AccessWrite, Subject: eff.Subject, Pins: routePins(eff.Session),
		Statements: eff.Statements, SessionEffects: eff.Session != 0, Unparsed: eff.ParseError != ""}
	if eff.Access == classify.Read {
		st.Access = route.AccessRead
	}
	if t := eff.Transaction; t != nil {
		switch {
		case eff.Tx == classify.TxBegin:
			st.Tx = route.TxBegin
		case eff.Tx == classify.TxBeginReadOnly:
			st.Tx = route.TxBeginReadOnly
		case t.Kind == classify.TxKindCommit:
			st.Tx = route.TxCommit
		case t.Kind == classify.TxKindRollback:
			st.Tx = route.TxRollback
		}
		st.NamesSerializable = t.NamesSerializable
	}
	reason, ok := routeReason(eff.Reason)
	if !ok {
		st.Access, reason = route.AccessWrite, route.ReasonUnknownEffect
	}
	st.Reason = reason
	return st
}

// unitStatement is planStatement for a unit, with the unit's shape.
func unitStatement(u *unit) route.Statement {
	st := planStatement(u.effects)
	switch {
	case u.prepareOnly:
		st.Shape = route.ShapePrepareOnly
	case u.endsNoTransaction:
		st.Shape = route.ShapeEndsNoTransaction
	}
	return st
}

// pinKinds pairs each pinning session effect with its kind of pin.
var pinKinds = [...]struct {
	bit classify.SessionEffect
	pin route.Pins
}{
	{classify.SessionListen, route.PinListen},
	{classify.SessionTempTable, route.PinTempTable},
	{classify.SessionHoldCursor, route.PinHoldCursor},
	{classify.SessionAdvisoryLock, route.PinAdvisoryLock},
	{classify.SessionSetRole, route.PinSetRole},
	{classify.SessionPrepare, route.PinSQLPrepare},
	{classify.SessionSerializableDefault, route.PinSerializableDefault},
}

// routePins returns the kinds of pin among the session effects e.
func routePins(e classify.SessionEffect) route.Pins {
	var pins route.Pins
	for _, k := range pinKinds {
		if e&k.bit != 0 {
			pins |= k.pin
		}
	}
	return pins
}

// describePin describes the pins among the session effects e in words.
func describePin(e classify.SessionEffect) string { return routePins(e).String() }

// planRequest gathers what the plan for u depends on: the unit's statement
// and the session's facts, with snap. Now is left to the caller.
func (sess *session) planRequest(u *unit, snap *route.Snapshot) route.PlanRequest {
	r := route.PlanRequest{Statement: unitStatement(u), Snapshot: snap, Policy: sess.srv.live().policy}
	f := &r.Session
	f.TransactionPooling = sess.srv.transactionPooling
	if d := sess.deferred; d != nil {
		f.Deferred = route.DeferredBegin{Open: true, Aborted: d.aborted, ReadOnly: d.effects.Tx == classify.TxBeginReadOnly, Begin: planStatement(d.effects)}
	}
	if be := sess.held; be != nil {
		f.Held = route.HeldNode{Node: be.node, Role: be.role,
			OpenReadOnlyBatch: heldTxState(be) == txOpenReadOnlyBatch, RepliesPending: be.expect.len() > 0}
		f.Pins = sess.pins.route()
		if f.Held.OpenReadOnlyBatch {
			// Read only for a batch that may leave its standby: the
			// settings are classified again to answer it.
			f.SetsIsolation = sess.settings.setsIsolation(sess.srv.opts.Classifier)
		}
		return r
	}
	f.PrimaryOnly = sess.settings.primaryOnly
	f.MaxLag = sess.maxLag
	sess.notePoolRoom(&r, snap)
	sess.noteGuard(u, &r, snap)
	return r
}

// notePoolRoom records in r's session facts the nodes the session has a
// backend on and the standbys whose connection pool has no room, for
// spreading reads. A unit that cannot go to a standby (it writes, pins, or
// the session needs the primary) does not ask the pool.
func (sess *session) notePoolRoom(r *route.PlanRequest, snap *route.Snapshot) {
	f := &r.Session
	f.Connected, f.Avoid = 0, 0
	if !r.MayReadOnStandby() {
		return
	}
	for i := range snap.Nodes {
		if i >= 64 {
			break
		}
		n := &snap.Nodes[i]
		if sess.backendOn(n.Name) != nil {
			f.Connected |= 1 << uint(i)
		}
		if n.Role == route.RoleStandby && sess.srv.opts.Pool.Saturated(n.Name) {
			f.Avoid |= 1 << uint(i)
		}
	}
}

// sendFailure describes how a unit's backend failed, for the plan's resend
// rule (route.Resend.Allows): sent says the unit's request reached the
// kernel, answered that some reply of it reached the client's buffer.
func sendFailure(err error, sent, answered bool) route.Failure {
	f := route.Failure{Sent: sent, Answered: answered}
	var taken *nodeUnresponsive
	var netErr net.Error
	var closing *backendClosing
	switch {
	case errors.As(err, &taken):
		f.Kind = route.FailureUnresponsive
	case errors.As(err, &netErr) && netErr.Timeout(),
		// What a timeout reports when the host's address stopped answering too.
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		f.Kind = route.FailureSilent
	case errors.As(err, &closing) && (closing.code == "57P01" || closing.code == "57P05"):
		f.Kind = route.FailureTerminated
	}
	return f
}

// choose finds the node for a unit with route.Plan and returns the session's
// backend there. It does the I/O the plan asks for: it leaves a read-only
// batch's standby (Outcome.LeaveHeldBatch), drops a held backend the plan
// refuses, acquires the backend, waits (up to routing.primary_wait) for a
// primary or for a node that did not answer to be seen down, and plans again.
func (sess *session) choose(ctx context.Context, u *unit) (*backend, route.Outcome, error) {
	snap := sess.srv.opts.Nodes.Snapshot()
	r := sess.planRequest(u, snap)
	left := false
	if be := sess.held; be != nil {
		r.Now = time.Now()
		out, err := route.Plan(r)
		switch {
		case err != nil:
			sess.dropBackend(be)
			return nil, out, err
		case out.LeaveHeldBatch:
			sess.leaveReadOnlyBatch(be)
			r, left = sess.planRequest(u, snap), true
		default:
			u.decideTime = time.Since(u.start)
			return be, out, nil
		}
	}
	r.Session.LeftReadOnlyBatch = left
	sess.turn++
	r.Session.Turn = sess.turn
	sess.noteReadFacts(ctx, u, &r, snap, waitInTurn)
	if fresh := sess.srv.opts.Nodes.Snapshot(); fresh != snap && sameNodeOrder(fresh, snap) &&
		(!sess.ryw.unsettled || r.Session.ReadAfter.LSN == route.UnreadLSN) {
		// Reading the write position may have waited (for a primary backend, up to
		// pool.acquire_timeout): the plan takes the node states as they are now, not as
		// before the wait, when their samples may have aged past monitor.down_after meanwhile
		// and every node looked down. The facts gathered index the same nodes. Only when the
		// position the read must see is exact (read, or none to read) or stands for one that
		// could not be read: a session whose last write's position was left unread because the
		// old states showed no standby could have even its previous one (settleCanWait) must be
		// planned on those states, or a standby seen past that older position would serve a
		// read that misses the last write.
		snap, r.Snapshot = fresh, fresh
		sess.notePoolRoom(&r, snap)
	}
	deadline := r.Now.Add(sess.srv.live().cfg.Routing.PrimaryWait)
	for {
		out, err := route.Plan(r)
		if u.decideTime == 0 {
			u.decideTime = time.Since(u.start)
		}
		if err != nil && out.Request.Access == route.AccessWrite && time.Now().Before(deadline) && !busyForGuard(err) {
			// No primary right now: a switchover may be under way. Wait for one.
			pr := r // a copy for the closure: the fast path stays on the stack
			snap = sess.awaitSnapshot(ctx, deadline, snap, func(s *route.Snapshot) bool {
				pr.Snapshot, pr.Now = s, time.Now()
				_, err := route.Plan(pr)
				return err == nil
			})
			r.Snapshot = snap
			sess.noteReadFactsAgain(ctx, u, &r, snap)
			out, err = route.Plan(r)
		}
		if err == nil && out.AwaitReplay {
			// No standby is known to have the session's last write: ask.
			out, err = sess.awaitReplay(ctx, &r, out)
		}
		if err != nil {
			return nil, out, err
		}
		dec := out.Decision
		wait := waitInTurn
		if u.prepareOnly && sess.srv.transactionPooling {
			// The backend goes back to the pool after the prepare's one round trip
			// (in session pooling the session keeps it).
			wait = waitBriefly
		}
		if dec.Role == route.RolePrimary && r.PreparesWrite() && !r.Session.PrimaryFull {
			// A write's prepare takes a primary backend only when one is free now
			// (route.SessionFacts.PrimaryFull): otherwise it is planned again, as a read's,
			// with what such a read needs gathered without waiting for the primary.
			wait = waitNot
		}
		be, err := sess.backendFor(ctx, dec.Node, dec.Role, wait)
		if err == nil && be == nil {
			r.Session.PrimaryFull = true
			sess.noteReadFacts(ctx, u, &r, snap, waitNot)
			sess.notePoolRoom(&r, snap)
			continue
		}
		if err == nil {
			return be, out, nil
		}
		if sess.planAroundLoginRefusal(&r, dec, err) {
			r.Now = time.Now()
			continue
		}
		refusal := nodeRefusalOfLogin(err)
		primaryNotAccepting := refusal == nodeLoginNotAccepting && dec.Role == route.RolePrimary
		if !(connectFailure(err) || primaryNotAccepting) || !time.Now().Before(deadline) {
			return be, out, err
		}
		snap = sess.awaitNodeChange(ctx, deadline, r, dec.Node, primaryNotAccepting)
		if ctx.Err() != nil {
			return nil, out, ctx.Err()
		}
		r.Snapshot = snap
		sess.noteReadFactsAgain(ctx, u, &r, snap)
	}
}

// noteReadFactsAgain gathers r's read facts and pool room again for snap, a snapshot choose
// waited for: what was gathered for the one before may not hold on it. The standbys that refused
// the login are indexed by position, which a reload meanwhile may have changed; and the write
// position a read must see may have been left unread because no standby of the old snapshot
// could have it (settleCanWait), while one of the new may have replayed the position before it
// and would serve a read that misses the session's last write.
func (sess *session) noteReadFactsAgain(ctx context.Context, u *unit, r *route.PlanRequest, snap *route.Snapshot) {
	sess.noteReadFacts(ctx, u, r, snap, waitInTurn)
	sess.notePoolRoom(r, snap)
}

// sameNodeOrder reports whether two snapshots list the same nodes in the same order, so that a
// node's index in one is its index in the other.
func sameNodeOrder(a, b *route.Snapshot) bool {
	if len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for i := range a.Nodes {
		if a.Nodes[i].Name != b.Nodes[i].Name {
			return false
		}
	}
	return true
}

// noteReadFacts gathers into r what only a read of u on a standby needs, when the plan may send
// it there: the write position to read after, the session's own or that of a definition change
// u's verdict rests on (reading it on the primary may wait there as wait says), and the standbys
// that refused the login a moment ago (node_login_refusals.go). It sets r.Now.
func (sess *session) noteReadFacts(ctx context.Context, u *unit, r *route.PlanRequest, snap *route.Snapshot, wait poolWait) {
	if r.MayReadOnStandby() && sess.mayNeedWritePosition(r, u) {
		sess.noteReadAfter(ctx, u, r, snap, wait)
	}
	r.Now = time.Now()
	if r.MayReadOnStandby() {
		r.Session.LoginRefused = sess.srv.nodeLoginRefusals.refusedMask(snap, sess.login.User, sess.login.Database, r.Now)
	}
}

// planAroundLoginRefusal reports whether err is a standby's refusal of the
// session's backend login for dec (the role or database is not replayed
// there yet, or it does not accept connections: not the client's error),
// and if so notes it and excludes the standby from r, so that the plan is
// made again without it. A standby r already excludes is not excluded again.
func (sess *session) planAroundLoginRefusal(r *route.PlanRequest, dec route.Decision, err error) bool {
	refusal := nodeRefusalOfLogin(err)
	if refusal == nodeLoginAccepted || dec.Role != route.RoleStandby || dec.NodeIndex < 0 || dec.NodeIndex >= 64 ||
		skippedNode(r.Session.LoginRefused, dec.NodeIndex) {
		return false
	}
	sess.noteLoginRefused(r.Snapshot, dec, err, refusal)
	r.Session.LoginRefused |= 1 << uint(dec.NodeIndex)
	return true
}

// skippedNode reports whether bit i of mask is set.
func skippedNode(mask uint64, i int) bool { return i >= 0 && i < 64 && mask&(1<<uint(i)) != 0 }

// noteLoginRefused logs a standby's refusal of the session's backend login
// and remembers it for the login (node, user, database), so that the
// session's next reads, and other sessions of the same login, do not try
// the standby again until it can have replayed what it lacked
// (node_login_refusals.go).
func (sess *session) noteLoginRefused(snap *route.Snapshot, dec route.Decision, err error, refusal nodeLoginRefusal) {
	now := time.Now()
	r := nodeLoginRefused{until: now.Add(notAcceptingMemory)}
	why := "the node is not accepting connections"
	if refusal == nodeLoginNotReplayed {
		why = "the role or database is not replayed there yet"
		r.until = now.Add(sess.srv.live().policy.MaxReplicaLag)
		// The role was created before the client logged in, so before
		// the primary's position now; the snapshot's is the newest known.
		// A sample older than the creation may show the standby there
		// already: then it must at least replay something more.
		for i := range snap.Nodes {
			n := &snap.Nodes[i]
			switch {
			case n.Role == route.RolePrimary && n.Up && n.WALPosition > r.replayPast:
				r.replayPast = n.WALPosition
			case i == dec.NodeIndex && n.WALPosition != 0 && n.WALPosition+1 > r.replayPast:
				r.replayPast = n.WALPosition + 1
			}
		}
	}
	sess.srv.nodeLoginRefusals.remember(nodeLoginKey{dec.Node, sess.login.User, sess.login.Database}, r, now)
	code := ""
	if pgErr := pool.PgError(err); pgErr != nil {
		code = pgErr.Code
	}
	sess.log.Info().Str("node", dec.Node).Str("sqlstate", code).Str("why", why).Time("remembered_until", r.until).
		Stringer("until_replayed", r.replayPast).Msg("a standby refused the session's backend login; the read is planned again without it")
}

// noteReadAfter puts in r the write position a read of u must see, for read
// your writes (readyourwrites.go): the session's last write position, made
// known first where a standby could have it; the position of a definition
// change u's verdict rests on, if later (definition_changes.go); and what
// the standbys are known to have replayed.
func (sess *session) noteReadAfter(ctx context.Context, u *unit, r *route.PlanRequest, snap *route.Snapshot, wait poolWait) {
	positionKnown := true
	if !sess.ryw.settleCanWait(snap) {
		positionKnown = sess.settleWritePosition(ctx, snap, wait)
	}
	var unflushed bool
	r.Session.ReadAfter, unflushed = sess.readAfter(ctx, snap)
	if !positionKnown && wait != waitNot {
		// A prepare planned without waiting for the primary (route.SessionFacts.PrimaryFull)
		// reads no data: it keeps the position as it was rather than wait for the primary.
		r.Session.ReadAfter, unflushed = unreadPosition(snap, r.Session.ReadAfter), true
	}
	r.Session.ReadAfterChange, r.Session.ReadAfterChanged = false, ""
	if pos, flush, changed := sess.definitionsReadAfter(ctx, u, snap, wait); pos.LSN != 0 {
		if raised := r.Session.ReadAfter.Raise(pos); raised != r.Session.ReadAfter {
			// The change's position is the later: whether it is flushed decides (the session's
			// own, earlier, is then too).
			r.Session.ReadAfter = raised
			r.Session.ReadAfterChange, r.Session.ReadAfterChanged = true, changed
			unflushed = notYetFlushed(pos, []route.WritePosition{flush, sess.ryw.flushSeen}, snap)
		}
	}
	if r.Session.ReadAfter.LSN != 0 {
		r.Session.Replayed = sess.ryw.fresh(snap)
	}
	// Not flushed on the primary: no standby can have it yet, so none
	// is asked; the plan takes one already seen past it, or the primary.
	r.Session.ReadAfterWaitOver = unflushed
}

// awaitNodeChange is choose's wait after the chosen node failed: it did not
// answer although the monitor last saw it up, or, primaryNotAccepting, the
// primary does not accept connections now (starting up, shutting down: a
// switchover may be under way). It waits until deadline for the monitor to
// see the node down, or for the plan r to choose another node, or, for a
// primary not accepting connections, for the monitor's next answer from
// it, and returns the last snapshot seen.
func (sess *session) awaitNodeChange(ctx context.Context, deadline time.Time, r route.PlanRequest, failed string, primaryNotAccepting bool) *route.Snapshot {
	failedAt := time.Now()
	return sess.awaitSnapshot(ctx, deadline, r.Snapshot, func(s *route.Snapshot) bool {
		for _, n := range s.Nodes {
			if n.Name == failed && (!n.Up || primaryNotAccepting && n.SampledAt.After(failedAt)) {
				return true
			}
		}
		r.Snapshot, r.Now = s, time.Now()
		next, err := route.Plan(r)
		return err != nil || next.Decision.Node != failed
	})
}

// awaitSnapshot waits until deadline for a node snapshot that satisfies
// cond and returns the last snapshot seen (snap if none came). It is kept
// out of choose so that the closures' captures do not move choose's
// variables to the heap on the path that never waits.
//
//go:noinline
func (sess *session) awaitSnapshot(ctx context.Context, deadline time.Time, snap *route.Snapshot, cond func(*route.Snapshot) bool) *route.Snapshot {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sess.srv.opts.Nodes.WaitFor(wctx, func(s *route.Snapshot) bool {
		snap = s
		return cond(s)
	})
	return snap
}

// connectFailure reports whether err means a node could not be reached (as
// opposed to the node refusing the login, or the pool being busy).
func connectFailure(err error) bool {
	var ce *clientError
	return errors.As(err, &ce) && ce.SQLState == sqlstateConnectionFailure
}

// backendFor returns a backend connection to node for the session: the one
// the session holds there (in session pool mode, or while a transaction, an
// open batch or a pin keeps it), or else one from the pool.
func (sess *session) backendFor(ctx context.Context, node string, role route.Role, wait poolWait) (*backend, error) {
	if be := sess.backendOn(node); be != nil {
		if beside := sess.besideCatalogueRead(ctx, be, node, role); beside != nil {
			return beside, nil
		}
		be.role = role
		return be, nil
	}
	target, ok := sess.srv.live().targets[node]
	if !ok {
		return nil, &clientError{SQLState: sqlstateInternalError, Message: "pgowl: unknown node " + node}
	}
	// The pool bounds the wait (acquire_timeout) and the dial (dial_timeout) itself.
	acquire := sess.srv.opts.Pool.Acquire
	switch wait {
	case waitBriefly:
		acquire = sess.srv.opts.Pool.AcquireBriefly
	case waitNot:
		acquire = sess.srv.opts.Pool.AcquireNow
	}
	c, err := acquire(ctx, target, sess.login)
	if err == nil && c == nil {
		return nil, nil // waitNot, and none was free
	}
	if err != nil {
		var abandoned *pool.AbandonedError
		if pool.PgError(err) == nil && !errors.As(err, &abandoned) {
			if _, busy := err.(*pool.BusyError); !busy {
				err = &clientError{SQLState: sqlstateConnectionFailure, Message: "pgowl: could not connect to " + node + ": " + err.Error(),
					Hint: "This condition is transient: retry shortly."}
			}
		}
		return nil, err
	}
	sess.srv.nodeLoginRefusals.forget(nodeLoginKey{node, sess.login.User, sess.login.Database})
	return sess.backends.add(c, node, role), nil
}

// poolWait says how backendFor waits for a pooled connection when none is free.
type poolWait uint8

const (
	// waitInTurn waits in arrival order, up to pool.acquire_timeout.
	waitInTurn poolWait = iota
	// waitBriefly waits ahead of the others: the unit only prepares, and gives the
	// connection back after one round trip.
	waitBriefly
	// waitNot does not wait: backendFor returns nil, nil when no connection is free now.
	waitNot
)

// releaseIdle gives a backend back to the pool after a unit that left nothing
// on it the session needs, in transaction pool mode. Its prepared statements
// and settings are recorded on the connection, so the next client that gets it
// knows what it holds.
func (sess *session) releaseIdle(be *backend) {
	if !sess.srv.transactionPooling || sess.held == be || be.broken || be.expect.len() > 0 {
		return
	}
	sess.backends.forget(be)
	if be.dirty {
		// What the connection holds is not known: start it afresh.
		code, err := sess.runQuietly(be, "DISCARD ALL")
		if err != nil || code != "" || be.conn.TxStatus != wire.TxIdle {
			sess.srv.opts.Pool.Release(be.conn, false)
			be.conn = nil
			return
		}
		be.reset()
	}
	if be.statements().count() > maxPreparedPerConn {
		// Bound what a long-lived connection accumulates.
		if _, err := sess.runQuietly(be, "DEALLOCATE ALL"); err != nil {
			sess.srv.opts.Pool.Release(be.conn, false)
			return
		}
		be.forgetPrepared()
	}
	sess.waitForCancel()
	sess.srv.opts.Pool.Release(be.conn, true)
	// In transaction pooling a session takes a backend for every unit: the
	// next one reuses this struct and its expectation queue.
	sess.backends.keepSpare(be)
}

// leaveReadOnlyBatch ends the batch's implicit read-only transaction on be with
// a Sync whose reply the client does not see, and hands be back, so that the
// rest of the batch is routed on its own (the plan's Outcome.LeaveHeldBatch
// says when). A backend that fails here is dropped.
func (sess *session) leaveReadOnlyBatch(be *backend) {
	sess.settleCatalogueReadOn(be)
	sess.held = nil
	c := be.conn
	if _, err := c.Writer.Write([]byte{wire.MsgSync, 0, 0, 0, 4}); err == nil {
		err = c.Writer.Flush()
		for err == nil {
			var typ byte
			var body []byte
			if typ, body, err = c.Reader.ReadFrame(); err == nil && typ == wire.MsgReadyForQuery && len(body) == 1 {
				c.TxStatus = body[0]
				be.openBatch, be.openReadOnly = false, false
				sess.log.Debug().Str("node", be.node).Msg("batch leaves the standby: its first part only read, the rest needs the primary")
				sess.releaseIdle(be)
				return
			}
		}
	}
	sess.dropBackend(be)
}

// statementStopped marks that nothing of the session runs any more, and
// returns once a cancel request for what ran is no longer being passed on.
// PostgreSQL signals a backend twice for one cancel request (the process and
// its process group), and a session whose statement was cancelled by the first
// signal could otherwise send its next statement (a COMMIT, say) on the same
// backend in time for the second: the next statement would be cancelled too.
func (sess *session) statementStopped() {
	sess.running.Store(nil)
	sess.runs.Add(1)
	sess.waitForCancel()
}

// statementStarted marks that the session's statement (or pgowl's EXPLAIN for it) runs on be
// from now until statementStopped, for cancel requests; it returns the run's number, which a
// limit's timer gives cancelIfStillRunning.
func (sess *session) statementStarted(be *backend) uint64 {
	sess.running.Store(&be.running)
	return sess.runs.Add(1)
}

// waitForCancel returns once no cancel request of the session is being passed
// on. PostgreSQL ignores a cancel that reaches a backend between statements,
// so a backend the node has already been told to cancel is safe to hand on.
func (sess *session) waitForCancel() {
	sess.cancelling.Lock()
	sess.cancelling.Unlock() //nolint:staticcheck // an empty critical section: waiting is the point
}

// maxPreparedPerConn bounds the pgowl-managed statements kept on one backend connection.
const maxPreparedPerConn = 2000

// prepareBackend brings a backend's session settings in line with the
// session's: the startup parameters come with the pooled connection, and the
// SETs the session made since are applied on top (after RESET ALL when the
// connection carries another session's).
func (sess *session) prepareBackend(be *backend) error {
	c := be.conn
	if settingsOn(c).carriesFor(sess.settings.key, sess.id) || be.openBatch || c.TxStatus != wire.TxIdle {
		// Settings are applied between transactions and batches only: a
		// query here would end the implicit transaction of an open batch.
		return nil
	}
	if !sess.settings.changesLexing(sess.srv.opts.Classifier) {
		var q strings.Builder
		if !settingsOn(c).carries("") {
			q.WriteString("RESET ALL;\n")
		}
		for _, s := range sess.settings.loads {
			q.WriteString(s)
			q.WriteString(";\n")
		}
		for _, s := range sess.settings.sets {
			q.WriteString(s)
			q.WriteString(";\n")
		}
		code, err := sess.runQuietly(be, q.String())
		if err != nil || code == "" {
			if err == nil {
				*settingsOn(c) = knownSettings(sess.settings.key)
			}
			return err
		}
	}
	// Statement by statement: after a failure (one statement failed, and the
	// string ran as one transaction: its RESET ALL is undone too, so whatever
	// the connection carried is still in force), or when a recorded SET
	// changes how later statements are read (standard_conforming_strings,
	// client_encoding): a string is read whole before any of it runs.
	// Start from the defaults alone, then apply what applies.
	if code, err := sess.runQuietly(be, "RESET ALL"); err != nil || code != "" {
		if err == nil {
			err = fmt.Errorf("RESET ALL failed on %s (%s)", be.node, code)
		}
		return err
	}
	*settingsOn(c) = connSettings{}
	failed := false
	for _, s := range sess.settings.replay() {
		code, err := sess.runQuietly(be, s)
		if err != nil {
			return err
		}
		failed = failed || code != ""
	}
	if failed {
		// Make the next use try again.
		*settingsOn(c) = connSettings{state: settingsReplayFailed}
		return nil
	}
	*settingsOn(c) = knownSettings(sess.settings.key)
	return nil
}

// runQuietly runs a statement the client does not see and consumes its
// reply. It returns the SQLSTATE of the first error the node reported, and an
// error only when the connection failed.
func (sess *session) runQuietly(be *backend, sql string) (sqlstate string, err error) {
	return sess.runOnBackend(be, sql, nil)
}

// runOnBackend runs sql, pgowl's own, on be as a simple Query and passes each
// DataRow body to onRow (if not nil). Its results and notices do not reach the
// client; a notification that arrives meanwhile does. It returns the first
// error's SQLSTATE ("" when none) or the I/O error that broke the connection.
func (sess *session) runOnBackend(be *backend, sql string, onRow func(body []byte)) (sqlstate string, err error) {
	return sess.runOnBackendFor(be, sql, onRow, false)
}

// abortBlockOn aborts the transaction block the session holds open on be, as a failure of the
// client's own statement there would (a refusal pgowl answered in its place): with sqlstate,
// one of pgowl's codes. The settings the block changed that the node reports (SET LOCAL
// application_name, TimeZone, ...) go back to their values before it, and the node's
// ParameterStatus saying so reaches the client, as it would with the failure: after the
// refusal's ErrorResponse, with pgowl's ReadyForQuery (parametersBeforeReady).
func (sess *session) abortBlockOn(be *backend, sqlstate string) {
	sess.runOnBackendFor(be, abortTransactionSQL(sqlstate), nil, true)
}

// runOnBackendFor is runOnBackend; with clientsParameters, the node's ParameterStatus messages
// are the client's (the statement ran for it): they are followed, and held for the client's
// next ReadyForQuery from pgowl.
func (sess *session) runOnBackendFor(be *backend, sql string, onRow func(body []byte), clientsParameters bool) (sqlstate string, err error) {
	sess.settleCatalogueReadOn(be)
	// The client's unnamed statement stays the client's: it is parsed again
	// where it runs next.
	be.conn.WriteQuery(sql)
	if err := be.conn.Writer.Flush(); err != nil {
		return "", err
	}
	for {
		typ, body, err := be.conn.Reader.ReadFrame()
		if err != nil {
			return sqlstate, err
		}
		switch typ {
		case wire.MsgDataRow:
			if onRow != nil {
				onRow(body)
			}
		case wire.MsgNotificationResponse:
			sess.client.w.Write(appendFrame(sess.scratch[:0], typ, body))
		case wire.MsgParameterStatus:
			if clientsParameters {
				if name, value, ok := parameterStatusFields(body); ok {
					sess.followParameterStatus(name, value)
				}
				sess.parametersBeforeReady = appendFrame(sess.parametersBeforeReady, typ, body)
			}
		case wire.MsgErrorResponse:
			code, _ := errorFields(body)
			if sqlstate == "" {
				sqlstate = code
			}
			// The node's message may quote a value (invalid value for
			// parameter ...: "..."): the log keeps its code only.
			sess.log.Warn().Str("node", be.node).Str("sqlstate", code).Str("statement", classify.Redact(sql)).Msg("a statement pgowl ran for the session failed")
		case wire.MsgReadyForQuery:
			be.conn.TxStatus = body[0]
			return sqlstate, nil
		}
	}
}

// resetTimeout bounds how long returning a connection clean may take.
const resetTimeout = 5 * time.Second

// dropBackend forgets a broken backend connection.
func (sess *session) dropBackend(be *backend) {
	if sess.cls.readOn == be {
		sess.abandonCatalogueRead()
	}
	be.broken = true
	sess.backends.forget(be)
	if sess.held == be {
		sess.held = nil
		sess.pins.lost()
		// A transaction block on it is gone: rolled back, with the settings changed in it (a
		// SET LOCAL search_path too, which the retried block must not be classified with).
		sess.endPgowlTransaction(false)
		sess.settings.settlePending(pendingSettled, false)
		sess.settings.endBlock()
		sess.restoreReportedParameters()
	}
	if !be.dropped {
		// Once: a later step of the same unit may meet the connection lost again (afterUnit's
		// follow-ups), and the session's hold on it is cleared then too, but the pool has it.
		be.dropped = true
		sess.srv.opts.Pool.Release(be.conn, false)
	}
}

// closeBackends returns the session's connections to the pool, clean.
func (sess *session) closeBackends() {
	sess.readCatalogueReadAtEnd()
	for _, be := range sess.backends.list {
		reusable := !be.broken && !be.openBatch && be.expect.len() == 0
		if reusable {
			be.conn.NetConn().SetDeadline(time.Now().Add(resetTimeout))
			if be.conn.TxStatus != wire.TxIdle {
				code, err := sess.runQuietly(be, "ROLLBACK")
				reusable = err == nil && code == ""
			}
			if reusable && (sess.pins.pinned() || !sess.srv.transactionPooling || be.dirty) {
				// State that cannot be tracked may be left: start afresh.
				code, err := sess.runQuietly(be, "DISCARD ALL")
				reusable = err == nil && code == ""
				be.reset()
			}
			reusable = reusable && be.conn.TxStatus == wire.TxIdle
			be.conn.NetConn().SetDeadline(time.Time{})
		}
		sess.waitForCancel()
		sess.srv.opts.Pool.Release(be.conn, reusable)
	}
	sess.backends.empty()
	sess.held = nil
}

// backendOn returns the session's connection to node, or nil.
func (sess *session) backendOn(node string) *backend { return sess.backends.on(node) }
