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
// settings count as unknown (it is reset before another session uses it, so
// that nothing pgowl cannot name stays on it for another session), and the
// session's settings are read back once the backend is idle; the connection
// is then the session's own (ownedSettings) and its next units run there
// without a reset.
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
	sess.flushBeforeFollowUp()
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
		// be may also hold what the session set under names pgowl cannot see: the
		// session's own until another session gets be, which resets it first.
		*be.settings() = ownedSettings(sess.settings.key, sess.id)
		sess.log.Info().Int("settings", len(sets)).Msg("a statement may have changed session settings in a way pgowl cannot replay as sent (inside a function or a DO block, with a computed value, or in a multi-statement string); pgowl read the session's settings back and carries their values")
	}
}

// flushBeforeFollowUp lets the client have the replies in its buffer (a unit's, which has ended:
// be is idle, with no catalogue read in flight) before a follow-up of the unit runs on the node
// (the settings read back, then the pin check that comes with it): the client is not kept
// waiting for them, and its next message is read only once they are done. In user scope the
// unit's write position, which another session of the user may read as soon as the client has
// its ReadyForQuery, was announced before (noteWrite).
func (sess *session) flushBeforeFollowUp() {
	// An error is the client's: its next read or flush reports it.
	_ = sess.client.flush()
}

// followSearchPathUnseen follows a unit u (which left the backend be in status) that may have
// changed search_path where its text does not say (searchPathMovedUnseen), so that the session
// knows what it created and how to classify the rest of its transaction block:
//   - while the path is unsure, a unit that writes or changes the catalogue may have created an
//     object in pg_temp unseen: the node is asked, between transactions, what the session's
//     temporary schema holds (the pin check);
//   - inside a block, at the first moment the backend is quiet (no batch open, no reply due, no
//     portal left suspended in the transaction), the path is read from the node and holds for
//     the rest of the block, as a change local to it. Until then the block's statements are
//     classified on the path followed so far; what they create is checked as above.
func (sess *session) followSearchPathUnseen(be *backend, u *unit, settled unitSettled) {
	if be.broken {
		return
	}
	if !u.runsNothing {
		if !(u.outcome.failed() && u.effects.Statements == 1) && sess.searchPathMovedUnseen(u, be.openBatch, settled) {
			sess.settings.searchPathUnsure = true
		}
		if sess.settings.searchPathUnsure && createsUnseen(&u.effects) {
			sess.pins.recheckLater()
		}
	}
	// Also after a unit that ran nothing (the Sync that ends a pipeline's parts).
	if sess.settings.searchPathUnsure && settled.status == wire.TxInBlock && !be.openBatch && be.expect.len() == 0 && !be.portalSuspended {
		sess.readSearchPathInBlock(be)
	}
}

// createsUnseen reports whether a unit of effects eff may create an object (in pg_temp, when the
// path puts it there) that its classification does not name: a CREATE, and any write, since
// SELECT INTO, a CALL or a function called from an INSERT may create a table (a body's CREATE
// TABLE is not a catalogue change), and a unit's reason names only its first write. A
// 'SET search_path = tenant; INSERT ...' string so costs one pin check between transactions,
// beside the read-back of its settings.
func createsUnseen(eff *classify.Effects) bool {
	return eff.CatalogueChange || eff.Access == classify.Write
}

// unitSettled is what afterUnit settled of a unit before the search path is followed: the
// backend's transaction status after it, how its session effects were tracked, and whether a
// savepoint statement was followed.
type unitSettled struct {
	status            byte
	tracking          effectsTracking
	savepointFollowed bool
}

// searchPathMovedUnseen reports whether unit u (run on a backend with a batch left open when
// openBatch) may have changed the search_path in force in a
// way the settings tracker did not follow, or ended the block that a followed change belonged to:
//   - a multi-statement string or batch that changes search_path (SET LOCAL, SET, set_config),
//     or that ends or rolls back part of a block in which the path was changed (COMMIT; BEGIN;
//     ROLLBACK TO);
//   - a single statement whose new path the tracker did not record: set_config with a computed
//     value, or inside a larger statement (SELECT set_config(...) AS old), a function that calls
//     set_config, a ROLLBACK TO a savepoint pgowl did not see set, a SET [LOCAL] in a part of a
//     batch sent at a Flush (settled only at its Sync; the later parts are classified before).
//
// A DO block, a CALL pgowl cannot read and an EXECUTE of an SQL prepared statement may call
// set_config unseen too, but they are left out: what they create is checked on the node anyway
// (sessionPins.mayHaveChanged), and a path read after each would cost every one of them a round
// trip inside a block. A single SET [LOCAL] search_path, RESET, or lone set_config call with a
// constant value is followed exactly (settingsTracker).
func (sess *session) searchPathMovedUnseen(u *unit, openBatch bool, settled unitSettled) bool {
	eff := &u.effects
	mayChange := slices.Contains(eff.SetConfigNames, "search_path") || slices.Contains(eff.SetConfigNames, "")
	// A session-level change pgowl did not record (one read back when the session is next
	// idle) outlives a block's end that opens the next (AND CHAIN), while the path read from
	// the node for it, kept as local to the old block, ends with it.
	unrecorded := sess.settings.readBackDue
	if eff.Statements != 1 {
		return mayChange || (eff.Tx != classify.TxNone && (unrecorded || sess.settings.pendingChangesSearchPath(sess.srv.opts.Classifier)))
	}
	switch txKind(*eff) {
	case classify.TxKindRollbackToSavepoint:
		return !settled.savepointFollowed && sess.settings.pendingChangesSearchPath(sess.srv.opts.Classifier)
	case classify.TxKindCommitAndChain, classify.TxKindRollbackAndChain:
		return unrecorded
	}
	if change := eff.SearchPath; change != nil && change.Known && u.setSQL != "" {
		if change.Local && len(eff.Settings) == 1 && eff.Settings[0].Local {
			// SET LOCAL, or a lone set_config(..., true): in a block, addLocal has it, and its text
			// is classified again with the block's later statements. Outside one it changes
			// nothing, unless a batch's implicit block is open. (A set_config inside a larger
			// statement may not run at all: WHERE false.)
			return settled.status == wire.TxIdle && openBatch
		}
		if replay, _ := settingReplay(*eff, u.setSQL); replay != "" && settled.tracking == trackExact {
			return false // recorded among the pending changes, or applied
		}
	}
	return mayChange
}

// readSearchPathInBlock reads the search_path in force on be, inside the open transaction block,
// and records it as a change local to the block (settingsTracker.addLocal): the block's later
// statements are classified on the path they run with, and it is dropped when the block ends,
// whatever its fate. What the session's own path becomes at the block's end is settled as
// before (the pending changes, or a read-back once idle). SHOW takes no snapshot, so a block
// that has not yet run a query may still set its isolation level after it.
//
// If the read fails, the block is lost: an error aborts it (only a cancel or a timeout could
// fail SHOW), or the connection is gone. The connection is closed then, so that the client's
// next statement meets it dead and is told its transaction is gone (lostBackend), rather than
// going on outside it unawares.
func (sess *session) readSearchPathInBlock(be *backend) {
	value, got := "", false
	code, err := sess.runOnBackend(be, "SHOW search_path", func(row []byte) {
		if values, ok := rowValues(row); ok && len(values) == 1 {
			value, got = values[0], true
		}
	})
	if err != nil || code != "" || !got {
		sess.log.Warn().Err(err).Str("node", be.node).Str("sqlstate", code).Msg("reading the search_path inside a transaction block failed; the block is lost, and the client is told at its next statement")
		be.conn.NetConn().Close()
		return
	}
	sess.settings.searchPathUnsure = false
	st := &sess.cls
	st.refresh(sess, sess.srv.opts.Classifier)
	if read := nonNil(classify.SplitSearchPath(value)); st.ctx.SearchPathUnknown || !slices.Equal(read, st.ctx.SearchPath) {
		// Recorded only when it differs from the path followed so far: a long block of strings
		// that set the path to what it was adds nothing to walk.
		sess.settings.addLocal("SELECT pg_catalog.set_config('search_path', " + quoteLiteral(value) + ", true)")
	}
	sess.log.Debug().Str("node", be.node).Str("search_path", value).Msg("search_path read inside a transaction block")
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
