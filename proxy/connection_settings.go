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
// part way (the next use resets them and replays them again). A RESET ALL or
// DISCARD ALL makes it known with no key; a successful replay, known with
// the session's key.
type connSettings struct {
	// key identifies the settings a session applied there ("" with none); it
	// counts only in settingsKnown.
	key string
	// state says whether key can be trusted.
	state connSettingsState
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
)

// knownSettings is the mark of a connection that carries exactly the settings key names.
func knownSettings(key string) connSettings { return connSettings{key: key} }

// carries reports whether the connection carries exactly the settings key
// names ("": the startup parameters alone).
func (s connSettings) carries(key string) bool { return s.state == settingsKnown && s.key == key }
