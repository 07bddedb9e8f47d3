package proxy

import "github.com/pgowl/pgowl/wire"

// discardsSequences reports whether a unit that ran without error included
// DISCARD SEQUENCES or DISCARD ALL, which end the session's currval and
// lastval state.
func discardsSequences(u *unit) bool {
	if u.runsNothing || u.failed() {
		return false
	}
	if len(u.stmts) == 0 {
		return u.effects.DiscardsSequences
	}
	for _, st := range u.stmts {
		if st.effects.DiscardsSequences {
			return true
		}
	}
	return false
}

// discardSequencesElsewhere follows a DISCARD SEQUENCES (or ALL) that ran on
// ran: the session's currval and lastval state lives on the backend where
// its nextval ran (the primary's), which need not be ran, so every other
// backend of the session discards its sequence state too. A backend that
// cannot run it now (inside an open batch) or fails to leaves the session,
// taking its state with it.
func (sess *session) discardSequencesElsewhere(ran *backend) {
	for _, be := range append([]*backend(nil), sess.backends.list...) {
		if be == ran || be.broken || be.conn == nil {
			continue
		}
		if be.openBatch || be.expect.len() > 0 || be.conn.TxStatus != wire.TxIdle || sess.held == be {
			sess.log.Warn().Str("node", be.node).Msg("DISCARD SEQUENCES could not reach a busy backend of the session; it leaves the session")
			if sess.held != be {
				sess.dropBackend(be)
			}
			continue
		}
		if code, err := sess.runQuietly(be, "DISCARD SEQUENCES"); err != nil || code != "" {
			sess.dropBackend(be)
		}
	}
}

// discardSequencesOn discards the sequence state a pooled primary backend
// may hold from other sessions before the first unit a session that ran
// DISCARD SEQUENCES (or ALL) runs on the primary: on a direct connection
// currval and lastval no longer answer after it, until the session calls
// nextval again. Inside a transaction or an open batch the backend is the
// session's own, where the DISCARD ran.
func (sess *session) discardSequencesOn(be *backend) error {
	if be.conn.TxStatus != wire.TxIdle || be.openBatch || be.expect.len() > 0 {
		return nil
	}
	code, err := sess.runQuietly(be, "DISCARD SEQUENCES")
	if err == nil && code != "" {
		sess.log.Warn().Str("node", be.node).Str("sqlstate", code).Msg("DISCARD SEQUENCES before the session's unit failed")
	}
	return err
}
