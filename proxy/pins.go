package proxy

import (
	"encoding/binary"
	"strings"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/wire"
)

// A pin ends when the state behind it is gone: the last channel unlistened,
// the last temporary table dropped, the last WITH HOLD cursor closed, the last
// session-level advisory lock released, the last SQL prepared statement
// deallocated. Whether a statement did that depends on what else the session
// holds (advisory locks nest; a session may have several temporary tables), so
// after a statement that may release such state (classify.SessionRelease)
// pgowl asks the node what remains, once the session is outside a
// transaction, and ends the pins whose state is gone.

// pinChecks are the questions, one per kind of pin, each a boolean expression
// that is true while state of that kind remains on the connection. Every name
// and operator is qualified: the session's search_path is in force.
var pinChecks = [...]struct {
	bit  classify.SessionEffect
	expr string
}{
	{classify.SessionListen, "EXISTS (SELECT FROM pg_catalog.pg_listening_channels())"},
	{classify.SessionTempTable, "EXISTS (SELECT FROM pg_catalog.pg_class WHERE relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema())" +
		" OR EXISTS (SELECT FROM pg_catalog.pg_proc WHERE pronamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema())" +
		" OR EXISTS (SELECT FROM pg_catalog.pg_type WHERE typnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema())"},
	{classify.SessionHoldCursor, "EXISTS (SELECT FROM pg_catalog.pg_cursors WHERE is_holdable)"},
	{classify.SessionAdvisoryLock, "EXISTS (SELECT FROM pg_catalog.pg_locks WHERE locktype OPERATOR(pg_catalog.=) 'advisory'" +
		" AND pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid())"},
	{classify.SessionPrepare, "EXISTS (SELECT FROM pg_catalog.pg_prepared_statements WHERE from_sql)"},
	// SET ROLE or SET SESSION AUTHORIZATION is in force unless both users are
	// the login's again (the login is appended as a literal).
	{classify.SessionSetRole, "NOT (current_user OPERATOR(pg_catalog.=) session_user AND session_user OPERATOR(pg_catalog.=) "},
}

// checkablePins are the pins pinChecks can end.
var checkablePins = func() classify.SessionEffect {
	var bits classify.SessionEffect
	for _, c := range pinChecks {
		bits |= c.bit
	}
	return bits
}()

// stateMayHaveChanged reports whether the unit may have left or ended state
// that pins the session in a way its classification cannot tell: a statement
// that may release pinned state while the session is pinned; one whose
// session effects are unknown (DO, EXECUTE of an SQL prepared statement); one
// that failed after it may have taken state (a session-level advisory lock
// survives the error); a transaction that rolled back while the session was
// pinned (temporary tables, LISTEN and cursors made in it are gone).
func (sess *session) stateMayHaveChanged(u *unit, status byte) bool {
	eff := u.effects
	switch {
	case u.runsNothing:
		return false
	case eff.Session&classify.SessionUnknown != 0:
		return true
	case eff.Session&classify.SessionRelease != 0 && sess.pinBits&checkablePins != 0:
		return true
	case u.failed() && eff.Session&pinningEffects != 0:
		return true
	case status == wire.TxIdle && eff.Tx != classify.TxNone && !u.outcome.committed && sess.pinBits&checkablePins != 0:
		return true
	}
	return false
}

// recheckPins asks be's node which kinds of pinning state the connection
// holds, if a unit may have changed that since the last check, and pins the
// session for exactly those. It runs only between transactions; an unusable
// connection is dropped (closing it releases everything it held).
func (sess *session) recheckPins(be *backend) {
	if !sess.pinsToCheck || be.conn.TxStatus != wire.TxIdle || be.openBatch || be.expect.len() > 0 {
		return
	}
	sess.pinsToCheck = false
	var sql strings.Builder
	sql.WriteString("SELECT ")
	for i, c := range pinChecks {
		if i > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString(c.expr)
		if c.bit == classify.SessionSetRole {
			sql.WriteString(quoteLiteral(sess.user))
			sql.WriteString(")")
		}
	}
	var remaining classify.SessionEffect
	answered := false
	code, err := sess.runOnBackend(be, sql.String(), func(row []byte) {
		values, ok := rowValues(row)
		if !ok || len(values) != len(pinChecks) {
			return
		}
		answered = true
		for i, v := range values {
			if v != "f" {
				remaining |= pinChecks[i].bit
			}
		}
	})
	if err != nil {
		sess.log.Warn().Err(err).Str("node", be.node).Msg("connection lost while checking what pins the session; its state ended with it")
		sess.dropBackend(be)
		return
	}
	if code != "" || !answered || be.conn.TxStatus != wire.TxIdle {
		return // keep every pin: nothing is known
	}
	if added := remaining &^ sess.pinBits; added != 0 {
		sess.pinBits |= added
		sess.log.Info().Str("node", be.node).Str("pinned_by", describePin(added)).Msg("session pinned to node")
	}
	if released := sess.pinBits & checkablePins &^ remaining; released != 0 {
		sess.pinBits &^= released
		sess.log.Info().Str("node", be.node).Str("released", describePin(released)).Msg("session pin released")
		if released&classify.SessionPrepare != 0 {
			// An SQL prepared statement may have been executed to change
			// settings (set_config) that pgowl did not follow: carry what
			// the session has now.
			sess.settingsChangedUnseen(be)
			sess.readSettingsBackIfDue(be)
		}
	}
}

// rowValues splits a DataRow body into its values as text; NULL is "".
func rowValues(body []byte) ([]string, bool) {
	if len(body) < 2 {
		return nil, false
	}
	n := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	values := make([]string, 0, n)
	for range n {
		if len(body) < 4 {
			return nil, false
		}
		size := int(int32(binary.BigEndian.Uint32(body)))
		body = body[4:]
		if size < 0 {
			values = append(values, "")
			continue
		}
		if len(body) < size {
			return nil, false
		}
		values = append(values, string(body[:size]))
		body = body[size:]
	}
	return values, true
}

// quoteLiteral quotes s as an escape string literal, which reads the same
// whatever the session set standard_conforming_strings to.
func quoteLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}
