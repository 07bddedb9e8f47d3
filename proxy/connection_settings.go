package proxy

// connSettings says which session settings a backend connection carries on
// top of its startup parameters, so that the next session that gets it knows
// whether to reset them first. It is part of pgowl's record of the
// connection (connRecord), which stays with it in the pool. The zero value
// is a connection that carries none.
//
// A connection's settings move between these states: known with a key (the
// settings a session's tracker names, "" for none); unknown, after a
// statement changed settings pgowl cannot name (the connection is reset
// before its next use and stays unknown until then: a later change does not
// make it known); replay failed, after replaying a session's settings failed
// part way (the next use resets them and replays them again); owned, once
// the session whose change made it unknown has read its settings back there:
// it carries what the key names and, besides, what only that session could
// set (a name pgowl cannot see), so it counts as the session's own for that
// session's next units (nothing it set is reset under it) and as unknown for
// every other session. A RESET ALL or DISCARD ALL makes it known with no key;
// a successful replay, known with the session's key; a change of the
// session's settings on a known or owned connection, known or owned with the
// new key.
type connSettings struct {
	// key identifies the settings a session applied there ("" with none); it
	// counts only in settingsKnown.
	key string
	// state says whether key can be trusted.
	state connSettingsState
	// owner is the id of the session an owned connection belongs to.
	owner uint64
}

// connSettingsState says how far a connection's settings key can be trusted.
type connSettingsState uint8

const (
	// settingsKnown: the connection carries exactly what the key names.
	settingsKnown connSettingsState = iota
	// settingsUnknown: a statement changed settings pgowl cannot name.
	settingsUnknown
	// settingsReplayFailed: replaying a session's settings failed part way.
	settingsReplayFailed
	// settingsOwned: the connection carries what the key names and settings only its owner
	// session can name.
	settingsOwned
)

// knownSettings is the mark of a connection that carries exactly the settings key names.
func knownSettings(key string) connSettings { return connSettings{key: key} }

// carries reports whether the connection carries exactly the settings key
// names ("": the startup parameters alone).
func (s connSettings) carries(key string) bool { return s.state == settingsKnown && s.key == key }

// carriesFor reports whether the connection carries exactly the settings key names for the
// session whose id is session: a connection that session owns counts.
func (s connSettings) carriesFor(key string, session uint64) bool {
	return s.carries(key) || s.state == settingsOwned && s.owner == session && s.key == key
}

// ownedSettings is the mark of a connection that carries the settings key names and what only
// session owner could set there.
func ownedSettings(key string, owner uint64) connSettings {
	return connSettings{key: key, state: settingsOwned, owner: owner}
}

// follow records that the session carried by a known or owned connection changed its settings to
// key there; an unknown or failed connection stays so.
func (s *connSettings) follow(key string) {
	if s.state == settingsKnown || s.state == settingsOwned {
		s.key = key
	}
}
