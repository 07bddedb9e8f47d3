package proxy

import (
	"slices"
	"strings"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/wire"
)

// How a session-level setting change is carried to the session's other
// backends. A SET or RESET statement is replayed as it was sent: it has no
// other effect and gives the same value everywhere. A set_config call is
// replayed only when it is the whole statement, with a constant name, and with
// a literal value; with a parameter value ($1) pgowl reads the value the
// setting got and replays that. Anything else that changes a setting (a
// function that calls set_config, a value computed by an expression) is not
// replayed: replaying would run the statement's other effects again and could
// compute another value. pgowl reads the values back instead
// (readSettingsBackIfDue) and replays those; the backend it ran on counts as
// unknown (reset before its next unit), so that nothing pgowl cannot name
// stays on it for another session.

// sessionSettingsQuery lists the settings the session changed on a backend:
// what pgowl replayed there for it and what its own statements set, and the
// values of the named settings that pg_settings does not list (settings of
// applications such as app.tenant, which PostgreSQL keeps as placeholders).
// The client's encoding comes first, so that the values after it are read in
// the encoding they were sent in.
func sessionSettingsQuery(names []string) string {
	var b strings.Builder
	b.WriteString(`SELECT name, setting FROM (SELECT name, setting FROM pg_catalog.pg_settings
WHERE source = 'session' AND name NOT IN ('role', 'session_authorization') AND name NOT LIKE 'transaction\_%'`)
	if len(names) > 0 {
		b.WriteString("\nUNION ALL SELECT n, pg_catalog.current_setting(n, true) FROM (VALUES ")
		for i, name := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + quoteLiteral(name) + "::text)")
		}
		b.WriteString(") AS v(n) WHERE pg_catalog.current_setting(n, true) IS NOT NULL")
	}
	b.WriteString(") AS s ORDER BY name <> 'client_encoding', name")
	return b.String()
}

// settingsChangedUnseen follows a unit that may have changed settings in a
// way that cannot be replayed as sent (set_config inside a function, a
// computed value, a multi-statement string, a DO block): the connection's
// settings count as unknown (it is reset before its next use, so that
// nothing pgowl cannot name stays on it for another session), and the
// session's settings are read back once the backend is idle.
func (sess *session) settingsChangedUnseen(be *backend) {
	sess.settings.readBackDue = true
	*be.settings() = connSettings{state: settingsUnknown}
}

// readSettingsBackIfDue reads the values the session's settings have on be,
// when a change is to be read back and be is idle (an open transaction block
// or batch may still undo it: then it waits for its end), and records them,
// replacing what the session had recorded, as set_config calls with those
// values. Other backends then get the values, not the statements that
// produced them.
func (sess *session) readSettingsBackIfDue(be *backend) {
	if !sess.settings.readBackDue || be.broken || be.conn.TxStatus != wire.TxIdle || be.openBatch || be.expect.len() > 0 {
		return
	}
	sess.settings.readBackDue = false
	named := sess.settings.readBackNames(sess.srv.opts.Classifier)
	var sets []string
	seen := map[string]bool{}
	serializable := false
	code, err := sess.runOnBackend(be, sessionSettingsQuery(named), func(row []byte) {
		if values, ok := rowValues(row); ok && len(values) == 2 && !seen[strings.ToLower(values[0])] {
			seen[strings.ToLower(values[0])] = true
			sets = append(sets, setConfigReplay(values[0], values[1]))
			serializable = serializable || (strings.EqualFold(values[0], "default_transaction_isolation") && strings.EqualFold(values[1], "serializable"))
		}
	})
	switch {
	case err != nil:
		sess.dropBackend(be)
	case code != "":
		sess.log.Warn().Str("sqlstate", code).Msg("a session setting changed in a way pgowl cannot replay, and reading the settings back failed; it holds on this connection only, which is reset before its next use")
	default:
		// A serializable default (set under a name pgowl could not read)
		// makes a standby refuse every statement.
		sess.settings.replaceWithReadBack(sets, serializable)
		sess.log.Info().Int("settings", len(sets)).Msg("a statement may have changed session settings in a way pgowl cannot replay as sent (inside a function or a DO block, with a computed value, or in a multi-statement string); pgowl read the session's settings back and carries their values")
	}
}

// searchPathMovedUnseen reports whether unit u, which left its transaction block open, may have
// changed the search_path in force for the rest of the block in a way the settings tracker did not
// follow, or may have ended the block that a followed change belonged to:
//   - a multi-statement string that changes search_path (SET LOCAL, SET, set_config), or that ends
//     or rolls back part of a block while changes are pending (COMMIT; BEGIN; ROLLBACK TO);
//   - a single statement whose new path cannot be read from its text: set_config with a computed
//     value, a function or DO block that calls set_config, a ROLLBACK TO a savepoint pgowl did not
//     see set.
//
// A single SET [LOCAL] search_path with a constant value is followed exactly (settingsTracker).
func (sess *session) searchPathMovedUnseen(u *unit, savepointFollowed bool) bool {
	eff := &u.effects
	mayChange := mayChangeSearchPath(eff)
	if eff.Statements != 1 {
		return mayChange || (eff.Tx != classify.TxNone && len(sess.settings.pending) > 0)
	}
	if change := eff.SearchPath; change != nil && change.Known && u.setSQL != "" {
		return false
	}
	if txKind(*eff) == classify.TxKindRollbackToSavepoint && !savepointFollowed && len(sess.settings.pending) > 0 {
		return true
	}
	return mayChange
}

// mayChangeSearchPath reports whether a unit of effects eff may change search_path: a SET, RESET
// or set_config of it, a set_config whose name is not a constant, or what the classifier cannot
// see into (a DO block).
func mayChangeSearchPath(eff *classify.Effects) bool {
	return slices.Contains(eff.SetConfigNames, "search_path") || slices.Contains(eff.SetConfigNames, "") ||
		eff.Session&classify.SessionUnknown != 0
}

// readSearchPathInBlock reads the search_path in force on be, inside the open transaction block,
// and records it as a change local to the block (settingsTracker.addLocal): the block's later
// statements are classified on the path they run with, and it is dropped when the block ends,
// whatever its fate. What the session's own path becomes at the block's end is settled as
// before (the pending changes, or a read-back once idle). SHOW takes no snapshot, so a block
// that has not yet run a query may still set its isolation level after it. It reports false when
// be was lost meanwhile (the block with it).
func (sess *session) readSearchPathInBlock(be *backend) bool {
	if be.openBatch || be.expect.len() > 0 {
		return true // the client's next statements are on their way: the path is left as followed
	}
	value, got := "", false
	code, err := sess.runOnBackend(be, "SHOW search_path", func(row []byte) {
		if values, ok := rowValues(row); ok && len(values) == 1 {
			value, got = values[0], true
		}
	})
	switch {
	case err != nil:
		// The block was on be: it is gone with it (dropBackend settles what was held there).
		sess.held = be
		sess.dropBackend(be)
		return false
	case code != "" || !got:
		sess.log.Warn().Str("node", be.node).Str("sqlstate", code).Msg("reading the search_path inside a transaction block failed; the block's later statements are classified on the path pgowl followed")
	default:
		sess.settings.addLocal("SELECT pg_catalog.set_config('search_path', " + quoteLiteral(value) + ", true)")
	}
	return true
}

// settingReplay says how the single statement sql, with effects eff, which
// changed a session setting, is carried: replay is the text to replay, or
// name is the setting whose value must be read back (set_config with a
// parameter). Both are empty when the change cannot be carried.
func settingReplay(eff classify.Effects, sql string) (replay, name string) {
	if len(eff.Settings) != 1 || eff.Settings[0].Local {
		return "", ""
	}
	switch change := eff.Settings[0]; change.Replay {
	case classify.ReplayStatement:
		return sql, ""
	case classify.ReplayReadBack:
		return "", change.Name
	}
	return "", ""
}

// recordedSetting is recordedChange with the session's classifier.
func (sess *session) recordedSetting(recorded string) (classify.SettingChange, bool) {
	return recordedChange(sess.srv.opts.Classifier, recorded)
}

// setConfigReplay is the statement that gives setting name the value it has.
func setConfigReplay(name, value string) string {
	return "SELECT pg_catalog.set_config('" + strings.ReplaceAll(name, "'", "''") + "', " + quoteLiteral(value) + ", false)"
}

// readSetting reads the value setting name has on be.
func (sess *session) readSetting(be *backend, name string) (string, bool, error) {
	var value string
	got := false
	code, err := sess.runOnBackend(be, "SELECT pg_catalog.current_setting("+quoteLiteral(name)+")", func(row []byte) {
		if values, ok := rowValues(row); ok && len(values) == 1 {
			value, got = values[0], true
		}
	})
	return value, got && code == "", err
}
