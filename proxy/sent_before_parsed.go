package proxy

import (
	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

// A statement sent before it is parsed.
//
// A CREATE [OR REPLACE] FUNCTION, PROCEDURE, TYPE or VIEW that is not temporary is a write that
// changes the catalogue whatever its parse says, and its first words say it is one
// (classify.ProvisionalCreate). Its full classification (a parse of the statement, and of a
// PL/pgSQL body's header) tells only what it makes and the NOTICE's subject, which nothing
// before the send reads. So, when the session is idle outside a transaction, holds no backend,
// has no change of its own to tell and no guard is configured, the session routes such a
// statement on the effects its words give and classifies it while the node runs it: the unit is
// "ahead" of its own parse (aheadStatement.unparsed), as a statement is ahead of a catalogue read
// (catalogue_read_in_flight.go), and it is finished the same way (finishAhead: final effects,
// the decision planned again for its reason) before any reply reaches the client. The read of
// the change that sendCatalogueRead writes behind a unit is written behind it once it is
// classified (parsedOnceSent), or the created object is kept for the catalogue to take in, as
// before. A unit that is not sent after all (no node could take it) is classified when it is
// given up (forgetAheadUnit); one routed with other statements that are not its own is
// classified before it is routed (routeAheadOfRead).
//
// A SELECT that the session's next statement after its own catalogue change is goes the same way
// (classify.ProvisionalSelect, classifyAheadOfRead), when every verdict sends it to the same
// primary: the change is taken in and the statement parsed once it is sent (sentAheadOfRead).
// Otherwise the change is taken in and the statement parsed before it is routed (parseAheadNow),
// so that no verdict is planned on a catalogue that misses the session's committed change.

// classifyOnceSent gives sql the effects its first words give when it is a CREATE that
// classify.ProvisionalCreate takes and the session may send it before it is parsed; the
// statement is then ahead of its parse.
func (sess *session) classifyOnceSent(sql string, paramTypes []uint32) (classify.Effects, bool) {
	st := &sess.cls
	effects, ok := classify.ProvisionalCreate(sql) // first: it turns most statements away at their first word
	if !ok || st.ahead != nil || st.changeRan || st.changeToTakeIn() || sess.held != nil || sess.deferred != nil ||
		sess.txState() != txIdle || len(sess.srv.live().cfg.Guards) > 0 {
		return classify.Effects{}, false
	}
	st.ahead = &aheadStatement{sql: sql, paramTypes: paramTypes, unparsed: true}
	return effects, true
}

// parseAheadNow classifies the statement ahead of its parse now, u not being sent ahead of it
// (after all): once the session's change is taken in, when one is to be (drainCatalogueRead
// finishes the statement then).
func (sess *session) parseAheadNow(u *unit) {
	if sess.cls.changeToTakeIn() {
		sess.drainCatalogueRead(u, true)
		return
	}
	sess.finishAhead(u, false, nil)
}

// sendsBeforeParse reports whether u is the unit of a statement ahead of its parse.
func (st *classifierState) sendsBeforeParse(u *unit) bool {
	return st.aheadUnit == u && st.ahead != nil && st.ahead.unparsed
}

// parsedOnceSent classifies the statement u was sent with before it was parsed, while the node
// runs it, and writes behind it the read of its catalogue change that sendCatalogueRead would
// have written with it.
func (sess *session) parsedOnceSent(be *backend, u *unit, role route.Role) error {
	sess.finishAhead(u, false, nil)
	sess.sendCatalogueRead(be, u, role)
	if be.conn.Writer.Buffered() > 0 {
		return be.conn.Writer.Flush()
	}
	return nil
}
