package proxy

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

// A catalogue read in flight.
//
// sendCatalogueRead writes the read of a catalogue change right behind the unit that makes it, on
// the same backend. Its replies used to be read before the unit's exchange ended, so the session's
// next statement waited for the read, the patch and a full classification before it was sent. Now
// the relay leaves them unread when the unit's own replies are done and nothing holds the backend
// (defersCatalogueRead): the backend stays the session's (the pool does not take a backend with
// replies pending), the client has its answer, and the session reads its next message.
//
// The next statement is classified without the catalogue (classify.ClassifyWithoutCatalogue). A
// verdict that cannot depend on a catalogue is final. One that may is provisional (the statement
// is "ahead" of the read): the unit it is part of is sent on it only when every verdict would
// send it to the same primary (sendsAlikeForAnyEffect: no standby to read on, or settings that
// keep every statement on the primary, no guard, no transaction or batch held); the read is then
// read, the catalogue patched and the statement classified again while the node runs it, before
// any reply of it reaches the client: the NOTICE, the log line and what the session follows of it
// use the final verdict. Otherwise the read is read first and the statement classified as before.
// So no statement is routed on a catalogue that misses its session's committed change: it is
// routed where any verdict would send it, or on the catalogue with the change.
//
// A function its statement describes in full (classify.CreatedFunction) is not read: nothing is
// sent behind the unit, and the catalogue takes the function from the statement (tellChanges,
// catalog.Manager.ChangedAndCreated). Until it has, the session treats it as a read in flight
// whose replies are all in (classifierState.changeToTakeIn): the next statement is classified
// ahead of it and sent when every verdict sends it alike, and the catalogue takes the function in
// while the node runs it (drainCatalogueRead, with no replies to read).
//
// The read is read (drainCatalogueRead) at the latest when the next unit is routed; before pgowl
// runs a query of its own on the backend (runOnBackend, readUntilReady); and when the backend is
// dropped or the session ends, when it is abandoned instead and the catalogue told of the change
// without it (the catalogue then reads the change itself).

// aheadStatement is a statement classified without the catalogue while the read was in flight,
// whose verdict may depend on it: its final effects are computed when the read is in.
type aheadStatement struct {
	sql        string
	paramTypes []uint32
	// pending is its parse, for the final classification.
	pending *classify.PendingStatement
	// unparsed: a statement its first words describe (a CREATE, classifyOnceSent, or a SELECT
	// ahead of the session's change, classifyAheadOfRead), classified once sent; pending is nil.
	unparsed bool
	// stmt is the prepared statement of an extended batch that holds the effects, nil for a
	// simple Query's.
	stmt *preparedStmt
}

// errSessionLeftRead fails a catalogue read the session did not read to its end.
var errSessionLeftRead = errors.New("the session's backend went before the read was read")

// classifyAheadOfRead classifies sql while the session's catalogue read is in flight, when it
// need not wait for the read: its verdict cannot depend on the catalogue (final effects), or the
// session has no statement ahead of the read yet (provisional effects; the statement is now
// ahead). A SELECT whose first words settle what routing reads before the send
// (classify.ProvisionalSelect) is not even parsed yet: it is ahead of its parse as well, parsed
// once sent or, when it is not sent ahead, before it is routed (routeAheadOfRead). A statement
// that changes the catalogue itself is not classified ahead: the changes told with the read must
// be those that ran before it.
func (sess *session) classifyAheadOfRead(sql string, paramTypes []uint32) (classify.Effects, bool) {
	st := &sess.cls
	if effects, ok := classify.ProvisionalSelect(sql); ok && st.ahead == nil {
		// Parsed once sent, if it is sent ahead (routeAheadOfRead), else before it is routed.
		st.ahead = &aheadStatement{sql: sql, paramTypes: paramTypes, unparsed: true}
		return effects, true
	}
	ctx := st.ctx
	ctx.ParamTypes = paramTypes
	effects, pending := sess.srv.opts.Classifier.ClassifyWithoutCatalogue(sql, &ctx)
	if effects.CatalogueChange || effects.Pgowl != nil {
		return classify.Effects{}, false
	}
	if pending == nil {
		return effects, true
	}
	if st.ahead != nil || effects.Statements != 1 || effects.Tx != classify.TxNone {
		return classify.Effects{}, false
	}
	st.ahead = &aheadStatement{sql: sql, paramTypes: paramTypes, pending: pending}
	return effects, true
}

// attachAhead records that the statement ahead of the read, just classified, is st's: its final
// effects go to st.
func (st *classifierState) attachAhead(stmt *preparedStmt) {
	if a := st.ahead; a != nil && a.stmt == nil && a.sql == stmt.sql {
		a.stmt = stmt
	}
}

// runs reports whether u runs the statement ahead (nil: none): the simple Query of its text, or
// the batch that holds its prepared statement.
func (ahead *aheadStatement) runs(u *unit) bool {
	if ahead == nil {
		return false
	}
	if u.stmts == nil {
		return ahead.stmt == nil && u.sql == ahead.sql
	}
	return ahead.stmt != nil && slices.Contains(u.stmts, ahead.stmt)
}

// routeAheadOfRead decides, as u is about to be routed, whether it goes before the session's
// catalogue read is read: only a unit with a statement ahead of the read that every verdict
// sends to the same primary (it is then finished when it has been sent, see exchangeOn). Any
// other unit has the read read first, and a statement of it ahead of the read classified again.
func (sess *session) routeAheadOfRead(u *unit) {
	if ahead := sess.cls.ahead; ahead != nil && ahead.unparsed {
		if ahead.runs(u) && sess.held == nil && sess.deferred == nil &&
			(!sess.cls.changeToTakeIn() || sess.sendsAlikeForAnyEffect(u)) {
			sess.cls.aheadUnit = u
		} else {
			sess.parseAheadNow(u) // before u is routed
		}
		return
	}
	if !sess.cls.changeToTakeIn() {
		return
	}
	if sess.cls.ahead.runs(u) && sess.sendsAlikeForAnyEffect(u) {
		sess.cls.aheadUnit = u
		return
	}
	sess.drainCatalogueRead(u, true)
}

// forgetAheadUnit forgets u as the unit sent ahead of the read once its routing is over: a unit
// that was sent was finished (sentAheadOfRead); one that was not (no node could take it) leaves
// its statement ahead, classified again when the read is read.
func (sess *session) forgetAheadUnit(u *unit) {
	if sess.cls.aheadUnit == u {
		sess.cls.aheadUnit = nil
		if ahead := sess.cls.ahead; ahead != nil && ahead.unparsed {
			sess.parseAheadNow(u) // not sent: parsed now, for its log line
		}
	}
}

// sentAheadOfRead finishes u, sent on be before the session's catalogue read was read: the read
// is read (first on be when it is the read's backend: its replies come before u's), and u
// classified again, before any reply of u is relayed.
func (sess *session) sentAheadOfRead(u *unit, be *backend) {
	if sess.cls.aheadUnit == u && sess.cls.changeToTakeIn() {
		if ahead := sess.cls.ahead; ahead != nil && ahead.pending != nil {
			ahead.pending.Prepare() // while the node runs the read
		}
		sess.drainCatalogueRead(u, sess.cls.readOn != be)
	}
}

// sendsAlikeForAnyEffect reports whether the plan sends u to the same primary whatever its
// statements' effects turn out to be: the session holds no backend and has no deferred BEGIN, no
// guard is configured (a guard's verdict depends on the effects), and the plans for u as a read
// and as a write agree on a primary, without a wait for a replay, where a read could not go to a
// standby anyway (the snapshot has none, or the session's settings keep it on the primary).
func (sess *session) sendsAlikeForAnyEffect(u *unit) bool {
	if sess.held != nil || sess.deferred != nil || len(sess.srv.live().cfg.Guards) > 0 {
		return false
	}
	snap := sess.srv.opts.Nodes.Snapshot()
	standbys := false
	for i := range snap.Nodes {
		if snap.Nodes[i].Role == route.RoleStandby {
			standbys = true
		}
	}
	now := time.Now()
	var first route.Decision
	for i, access := range [...]route.Access{route.AccessRead, route.AccessWrite} {
		r := sess.planRequest(u, snap)
		r.Statement.Access = access
		if access == route.AccessRead {
			r.Statement.Reason = route.ReasonReadOnly
		} else {
			r.Statement.Reason = route.ReasonUnknownEffect
		}
		if standbys && r.MayReadOnStandby() {
			return false
		}
		r.Now = now
		out, err := route.Plan(r)
		if err != nil || out.AwaitReplay || out.CarriesBegin || out.LeaveHeldBatch || out.Decision.Role != route.RolePrimary {
			return false
		}
		if i == 0 {
			first = out.Decision
		} else if out.Decision.Node != first.Node {
			return false
		}
	}
	return true
}

// besideCatalogueRead returns, for the unit sent ahead of the session's catalogue read, an idle
// pooled backend on node beside be, the read's, so that the node runs the unit and the read at
// once: in transaction pooling, when one is free now with the session's settings (a dial, or a
// round trip to set them, costs more than the read it saves); nil otherwise.
func (sess *session) besideCatalogueRead(ctx context.Context, be *backend, node string, role route.Role) *backend {
	if be != sess.cls.readOn || sess.cls.aheadUnit == nil || !sess.srv.transactionPooling {
		return nil
	}
	target, ok := sess.srv.live().targets[node]
	if !ok {
		return nil
	}
	c, err := sess.srv.opts.Pool.AcquireIdle(ctx, target, sess.login)
	if err != nil || c == nil {
		return nil
	}
	if !settingsOn(c).carriesFor(sess.settings.key, sess.id) {
		sess.srv.opts.Pool.Release(c, true)
		return nil
	}
	return sess.backends.add(c, node, role)
}

// drainCatalogueRead reads the replies of the session's catalogue read in flight, tells the
// catalogue (patching it with the read), and classifies the statement ahead of the read again:
// its prepared statement's effects, and those of the unit being run with it (the unit u, or the
// one sent ahead), with the unit's decision planned again for the reason its NOTICE and log line
// give. With release, the backend goes back to the pool (in transaction pooling) when nothing
// holds it: no unit of the session is on it.
func (sess *session) drainCatalogueRead(u *unit, release bool) {
	st := &sess.cls
	be := st.readOn
	if be == nil {
		if st.changeToTakeIn() {
			// A created function, described by its statement: no read to wait for.
			began := time.Now()
			sess.catalogueReadIn()
			if u == nil {
				u = st.aheadUnit
			}
			sess.finishAhead(u, false, &aheadTimes{patch: time.Since(began)})
		}
		return
	}
	st.readOn = nil
	lost := false
	began := time.Now()
	if be.expect.len() > 0 && be.expect.front().catalogueRead != nil {
		read := be.expect.front().catalogueRead
		var err error
		if lost, err = sess.relayCatalogueRead(be, read); err != nil {
			// The client went before anything of the read was read: its replies are still
			// on be, which no one may use now.
			read.Fail(err)
			lost = true
		} else {
			be.expect.pop()
		}
	}
	if run := sess.running.Load(); run == &be.running && run.behindRead != nil {
		// The node is past the read: a cancel now reaches the statement. Only the session
		// closes it, once (the field is reset for the backend's next statement).
		select {
		case <-run.behindRead:
		default:
			close(run.behindRead)
		}
		if run.cancelAfterRead.Swap(false) {
			sess.passOnCancel() // the client's request reached the read: now the statement
		}
	}
	times := &aheadTimes{readWait: time.Since(began), read: true}
	sess.catalogueReadIn()
	times.patch = time.Since(began) - times.readWait
	if u == nil {
		u = st.aheadUnit
	}
	// The unit sent ahead runs beside the read when the session's running statement is not on be.
	running := sess.running.Load()
	sess.finishAhead(u, running != nil && running != &be.running, times)
	switch {
	case lost:
		sess.dropBackend(be) // closed, never back to the pool as reusable
	case release:
		sess.releaseIdle(be)
	}
}

// catalogueReadIn tells the catalogue what the session changed, with the read now in, when the
// change's transaction is over.
func (sess *session) catalogueReadIn() {
	if st := &sess.cls; st.changeRan && sess.idleForCatalogue() {
		st.tellChanges(sess.srv.opts.Classifier, sess.srv.definitions)
	}
}

// aheadTimes is, for the debug log, how long the statement ahead of a read waited for the read's
// replies once it was sent (readWait, which includes flushing the client's buffered replies and
// passing on a cancel that came meanwhile), and how long the catalogue took to take the read in
// (patch). Both are on the statement's path: its replies wait for them and for its final
// classification (and for the plan again, which is not timed).
type aheadTimes struct {
	readWait, patch time.Duration
	// read: the change was read (readWait is timed); else it was a function taken from its
	// statement (classify.CreatedFunction).
	read bool
}

// finishAhead classifies the statement ahead of the read again, with the catalogue now current,
// and gives the final effects to its prepared statement and to u when u runs it; beside says,
// for the debug log, that u runs on another backend than the read's, and times what the read cost
// the statement (nil: the read was not read).
func (sess *session) finishAhead(u *unit, beside bool, times *aheadTimes) {
	st := &sess.cls
	ahead := st.ahead
	st.ahead, st.aheadUnit = nil, nil
	if ahead == nil {
		return
	}
	began := time.Now()
	final := sess.classifyAhead(ahead)
	classified := time.Since(began)
	if ahead.stmt != nil {
		ahead.stmt.effects = final
	}
	if u == nil || !ahead.runs(u) {
		return
	}
	if u.stmts != nil {
		u.effects = batchEffects(u.stmts)
	} else {
		u.effects = final
	}
	if u.decision.Node == "" {
		return // not routed yet
	}
	// The reason the NOTICE and the log line give: the plan for the final effects, which sends
	// the unit where it went (sendsAlikeForAnyEffect).
	r := sess.planRequest(u, sess.srv.opts.Nodes.Snapshot())
	r.Now = time.Now()
	if out, err := route.Plan(r); err == nil && out.Decision.Node == u.decision.Node && out.Decision.Role == u.decision.Role {
		u.decision = out.Decision
		ev := sess.log.Debug()
		if ev.Enabled() {
			ev = ev.Str("node", u.decision.Node).Stringer("reason", u.decision.Reason).Bool("beside_read", beside)
			if times != nil {
				if times.read {
					ev = ev.Float64("read_wait_ms", milliseconds(times.readWait))
				}
				ev = ev.Float64("patch_ms", milliseconds(times.patch))
			}
			msg := "statement sent before its session's catalogue change was taken in; classified again with it"
			if ahead.unparsed && times == nil {
				msg = "statement sent before it was parsed; classified while the node ran it"
			}
			ev.Bool("parsed_once_sent", ahead.unparsed).Float64("classify_ms", milliseconds(classified)).Msg(msg)
		}
	} else {
		sess.log.Warn().Str("node", u.decision.Node).Msg("a statement sent before its session's catalogue read was read would now be routed elsewhere; it ran where it was sent")
	}
}

// classifyAhead gives the final effects of the statement ahead of the read, from its kept parse,
// with the session's context as it is now; one that turns out to change the catalogue goes
// through classify, which follows such changes.
func (sess *session) classifyAhead(ahead *aheadStatement) classify.Effects {
	st := &sess.cls
	c := sess.srv.opts.Classifier
	st.refresh(sess, c)
	if ahead.unparsed {
		return sess.classifyNow(ahead.sql, ahead.paramTypes)
	}
	ctx := st.ctx
	ctx.ParamTypes = ahead.paramTypes
	final := c.ClassifyPending(ahead.pending, &ctx)
	if final.CatalogueChange {
		return sess.classifyNow(ahead.sql, ahead.paramTypes)
	}
	return final
}

// settleCatalogueReadOn reads the session's catalogue read in flight on be before pgowl runs a
// query of its own there.
func (sess *session) settleCatalogueReadOn(be *backend) {
	if sess.cls.readOn == be {
		sess.drainCatalogueRead(nil, false)
	}
}

// catalogueReadGrace is how long an idle session waits for its client's next message before it
// reads its catalogue read in flight: a client that sends its next statement at once (a migration
// script, a pipeline) has it sent ahead of the read when it may; one that does not gets the read
// read meanwhile, so that the catalogue is told of the committed change, and the connection goes
// back to the pool, within this bound.
const catalogueReadGrace = 5 * time.Millisecond

// awaitClientOrRead waits, while the session's catalogue read is in flight, up to
// catalogueReadGrace for the start of the client's next message, and reads the catalogue read
// when none came. It reports false when the server's shutdown drain may have set the client's
// read deadline meanwhile (the caller then checks again for shutdown).
func (sess *session) awaitClientOrRead() bool {
	if !sess.cls.changeToTakeIn() || sess.client.r.Buffered() > 0 {
		return true
	}
	conn := sess.client.conn
	conn.SetReadDeadline(time.Now().Add(catalogueReadGrace))
	_, _, err := sess.client.r.PeekHeader() // consumes nothing
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		// Silent for now (or gone: the next read meets that again).
		sess.drainCatalogueRead(nil, true)
	}
	return !sess.srv.shutdown.draining.Load()
}

// readCatalogueReadAtEnd reads the session's catalogue read in flight as the session ends (the
// replies are there, or nearly), so that the catalogue is patched with it and the connection goes
// back to the pool; the read is abandoned when that fails. A statement left ahead of it is not
// classified again: nothing will run it.
func (sess *session) readCatalogueReadAtEnd() {
	be := sess.cls.readOn
	if be == nil {
		sess.catalogueReadIn() // a created function, if any
		return
	}
	sess.cls.ahead, sess.cls.aheadUnit = nil, nil
	be.conn.NetConn().SetDeadline(time.Now().Add(resetTimeout))
	sess.drainCatalogueRead(nil, false)
	if !be.broken {
		be.conn.NetConn().SetDeadline(time.Time{})
	}
}

// abandonCatalogueRead gives up the session's catalogue read in flight, whose backend goes (it is
// dropped, or the session ends): the catalogue is told of the change without it, and reads it; a
// statement ahead of the read is classified again with that catalogue (a unit sent ahead on the
// backend that went is sent again, if at all, with its final effects).
func (sess *session) abandonCatalogueRead() {
	st := &sess.cls
	if st.readOn == nil {
		return
	}
	st.readOn = nil
	if st.read != nil {
		st.read.Fail(errSessionLeftRead)
	}
	sess.catalogueReadIn()
	sess.finishAhead(st.aheadUnit, false, nil)
}

// defersCatalogueRead reports whether the relay of u on be leaves the catalogue read at the head
// of be's replies unread: the read is u's own, the last reply due, and nothing will hold the
// backend when u is done (a pin or a transaction would keep it, and the idle relay of a listening
// session needs its replies read).
func (sess *session) defersCatalogueRead(be *backend) bool {
	return sess.cls.readOn == be && be.expect.len() == 1 && sess.held == nil && !sess.pins.pinned() &&
		sess.deferred == nil && !be.openBatch
}
