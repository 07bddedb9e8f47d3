package proxy

import (
	"encoding/binary"
	"strings"

	"github.com/pgowl/pgowl/classify"
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
// that is true while state of that kind remains on the connection.
var pinChecks = [...]struct {
	bit  classify.SessionEffect
	expr string
}{
	{classify.SessionListen, "EXISTS (SELECT FROM pg_catalog.pg_listening_channels())"},
	{classify.SessionTempTable, "EXISTS (SELECT FROM pg_catalog.pg_class WHERE relnamespace = pg_catalog.pg_my_temp_schema())"},
	{classify.SessionHoldCursor, "EXISTS (SELECT FROM pg_catalog.pg_cursors WHERE is_holdable)"},
	{classify.SessionAdvisoryLock, "EXISTS (SELECT FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid())"},
	{classify.SessionPrepare, "EXISTS (SELECT FROM pg_catalog.pg_prepared_statements WHERE from_sql)"},
	// SET ROLE or SET SESSION AUTHORIZATION is in force unless both users are
	// the login's again (the login is appended as a literal).
	{classify.SessionSetRole, "NOT (current_user = session_user AND session_user = "},
}

// checkablePins are the pins pinChecks can end.
var checkablePins = func() classify.SessionEffect {
	var bits classify.SessionEffect
	for _, c := range pinChecks {
		bits |= c.bit
	}
	return bits
}()

// recheckPins asks be's node which of the session's pins still hold state, if
// a statement may have released some since the last check, and ends the
// others. It runs only between transactions; an unusable connection is dropped
// (closing it releases everything it held).
func (sess *session) recheckPins(be *backend) {
	if !sess.pinsToCheck || be.conn.TxStatus != 'I' || be.openBatch || be.expect.len() > 0 {
		return
	}
	sess.pinsToCheck = false
	asked := sess.pinBits & checkablePins
	if asked == 0 {
		return
	}
	var sql strings.Builder
	sql.WriteString("SELECT ")
	var bits []classify.SessionEffect
	for _, c := range pinChecks {
		if asked&c.bit != 0 {
			if len(bits) > 0 {
				sql.WriteString(", ")
			}
			sql.WriteString(c.expr)
			if c.bit == classify.SessionSetRole {
				sql.WriteString(quoteLiteral(sess.user))
				sql.WriteString(")")
			}
			bits = append(bits, c.bit)
		}
	}
	var remaining classify.SessionEffect
	answered := false
	code, err := sess.runOnBackend(be, sql.String(), func(row []byte) {
		values, ok := rowValues(row)
		if !ok || len(values) != len(bits) {
			return
		}
		answered = true
		for i, v := range values {
			if v != "f" {
				remaining |= bits[i]
			}
		}
	})
	if err != nil {
		sess.log.Warn().Err(err).Str("node", be.node).Msg("connection lost while checking what pins the session; its state ended with it")
		sess.dropBackend(be)
		return
	}
	if code != "" || !answered || be.conn.TxStatus != 'I' {
		return // keep every pin: nothing is known
	}
	if released := asked &^ remaining; released != 0 {
		sess.pinBits &^= released
		sess.log.Info().Str("node", be.node).Str("released", describePin(released)).Msg("session pin released")
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
