package proxy

// loadStatement returns the statement that loads again what a unit that ran
// without error loaded: it is one LOAD 'library'.
func loadStatement(u *unit) (string, bool) {
	if u.runsNothing || u.failed() || u.effects.Statements != 1 || u.setSQL == "" || u.effects.Loads == "" {
		return "", false
	}
	return "LOAD " + quoteLiteral(u.effects.Loads), true
}

// noteLoad follows a LOAD that ran on be. A library stays loaded in a
// backend for its life (RESET ALL and DISCARD ALL do not unload it), and it
// may define settings (SET plpgsql.…) that the session's later statements
// use on any of its backends: like a setting, the LOAD is replayed on the
// session's other backends before their next use, ahead of the settings.
func (sess *session) noteLoad(be *backend, load string) {
	current := be.settings().carriesFor(sess.settings.key, sess.id)
	added, full := sess.settings.addLoad(load)
	if full {
		sess.log.Warn().Str("statement", load).Msg("too many LOADs to replay: this one holds on its backend only")
	}
	if added && current {
		be.settings().follow(sess.settings.key)
	}
}
