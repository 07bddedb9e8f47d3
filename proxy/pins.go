package proxy

import (
	"encoding/binary"
	"strings"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
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
	{classify.SessionTempTable, tempSchemaObjectsRemain},
	{classify.SessionHoldCursor, "EXISTS (SELECT FROM pg_catalog.pg_cursors WHERE is_holdable)"},
	{classify.SessionAdvisoryLock, "EXISTS (SELECT FROM pg_catalog.pg_locks WHERE locktype OPERATOR(pg_catalog.=) 'advisory'" +
		" AND pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid())"},
	{classify.SessionPrepare, "EXISTS (SELECT FROM pg_catalog.pg_prepared_statements WHERE from_sql)"},
	// SET ROLE or SET SESSION AUTHORIZATION is in force unless both users are
	// the login's again (the login is appended as a literal).
	{classify.SessionSetRole, "NOT (current_user OPERATOR(pg_catalog.=) session_user AND session_user OPERATOR(pg_catalog.=) "},
}

// tempSchemaObjectsRemain asks whether anything remains in the session's temporary schema, in
// every catalogue an object created there can be in (classify's createsInTempSchema): relations,
// functions, types, operators, collations, text search objects, conversions, operator classes and
// families, and extended statistics.
var tempSchemaObjectsRemain = func() string {
	var check strings.Builder
	for i, catalogue := range [][2]string{
		{"pg_class", "relnamespace"}, {"pg_proc", "pronamespace"}, {"pg_type", "typnamespace"},
		{"pg_operator", "oprnamespace"}, {"pg_collation", "collnamespace"}, {"pg_ts_config", "cfgnamespace"},
		{"pg_ts_dict", "dictnamespace"}, {"pg_ts_parser", "prsnamespace"}, {"pg_ts_template", "tmplnamespace"},
		{"pg_conversion", "connamespace"}, {"pg_opclass", "opcnamespace"}, {"pg_opfamily", "opfnamespace"},
		{"pg_statistic_ext", "stxnamespace"},
	} {
		if i > 0 {
			check.WriteString(" OR ")
		}
		check.WriteString("EXISTS (SELECT FROM pg_catalog." + catalogue[0] + " WHERE " + catalogue[1] +
			" OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema())")
	}
	return check.String()
}()

// checkablePins are the pins pinChecks can end.
var checkablePins = func() classify.SessionEffect {
	var bits classify.SessionEffect
	for _, c := range pinChecks {
		bits |= c.bit
	}
	return bits
}()

// sessionPins is the pinning state a session holds on its held node: which
// kinds of state tie it there (what pinned it), and whether a unit may have
// changed them in a way its classification cannot tell, so that the node
// must be asked what remains.
//
// States and transitions (the event, then what follows):
//
//	unpinned        a unit takes pinning state (take)               pinned by those kinds
//	pinned          a unit takes more                               pinned by more kinds
//	pinned          a unit may have released some (noteUnit)        pinned, recheck due
//	any             a unit with unknown effects, or one that failed  recheck due
//	                after it may have taken state (noteUnit)
//	recheck due     between transactions: the node is asked         pinned by what remains (settle)
//	                (checkDue, then settle)
//	any             DISCARD ALL (releaseAll), or the backend is lost unpinned
//	                (lost: the recheck stays due)
//
// It does no I/O: the session runs the check on the node (recheckPins) and
// gives the answer to settle.
type sessionPins struct {
	// kinds are the pinning session effects in force (pinningEffects bits).
	kinds classify.SessionEffect
	// recheck: a unit may have ended or taken state behind a pin unseen; the
	// node is asked what remains once the session is between transactions.
	recheck bool
}

// pinned reports whether any pin ties the session to its node.
func (p *sessionPins) pinned() bool { return p.kinds != 0 }

// has reports whether the session is pinned by state of kind k.
func (p *sessionPins) has(k classify.SessionEffect) bool { return p.kinds&k != 0 }

// route returns the pins in the router's terms.
func (p *sessionPins) route() route.Pins { return routePins(p.kinds) }

// take adds the pinning kinds among a unit's session effects and returns
// the kinds it added (0 when the session was pinned by all of them already).
func (p *sessionPins) take(effects classify.SessionEffect) (added classify.SessionEffect) {
	added = effects & pinningEffects &^ p.kinds
	p.kinds |= added
	return added
}

// releaseAll ends every pin (DISCARD ALL) and returns the kinds released.
func (p *sessionPins) releaseAll() (released classify.SessionEffect) {
	released, p.kinds = p.kinds, 0
	return released
}

// lost ends every pin with the backend that held the state; a recheck that
// was due stays due (it asks the next node, and finds nothing there).
func (p *sessionPins) lost() { p.kinds = 0 }

// noteUnit marks the recheck due when the unit may have left or ended state
// that pins the session in a way its classification cannot tell: a
// statement that may release pinned state while the session is pinned; one
// whose session effects are unknown (DO, EXECUTE of an SQL prepared
// statement); one that failed after it may have taken state (a
// session-level advisory lock survives the error); a transaction that
// rolled back while the session was pinned (temporary tables, LISTEN and
// cursors made in it are gone). status is the node's transaction status
// after the unit.
func (p *sessionPins) noteUnit(u *unit, status byte) {
	if p.mayHaveChanged(u, status) {
		p.recheck = true
	}
}

// mayHaveChanged is noteUnit's rule.
func (p *sessionPins) mayHaveChanged(u *unit, status byte) bool {
	eff := u.effects
	switch {
	case u.runsNothing:
		return false
	case eff.Session&classify.SessionUnknown != 0:
		return true
	case eff.Session&classify.SessionRelease != 0 && p.kinds&checkablePins != 0:
		return true
	case u.failed() && eff.Session&pinningEffects != 0:
		return true
	case status == wire.TxIdle && eff.Tx != classify.TxNone && !u.outcome.committed && p.kinds&checkablePins != 0:
		return true
	}
	return false
}

// recheckLater asks for the node to be asked what pins remain, when the session is next between
// transactions: a unit may have made state that its classification did not show (an object
// created in pg_temp on a search_path pgowl did not know).
func (p *sessionPins) recheckLater() { p.recheck = true }

// recheckDue reports whether a unit may have changed the pinning state
// unseen since the node was last asked.
func (p *sessionPins) recheckDue() bool { return p.recheck }

// checkDue reports whether the node must be asked what pins remain now: a
// recheck is due and the backend is between transactions and batches, with
// no reply pending (between says so). It clears the recheck when it says
// yes: one question answers it, whatever the answer.
func (p *sessionPins) checkDue(between bool) bool {
	if !p.recheck || !between {
		return false
	}
	p.recheck = false
	return true
}

// settle applies the node's answer to the pin check: remaining are the
// kinds of state the connection holds. Kinds found there pin the session
// (added); checkable kinds not found end (released). Kinds that cannot be
// checked stay.
func (p *sessionPins) settle(remaining classify.SessionEffect) (added, released classify.SessionEffect) {
	added = remaining &^ p.kinds
	p.kinds |= added
	released = p.kinds & checkablePins &^ remaining
	p.kinds &^= released
	return added, released
}

// pinCheckQuery is the query that asks a node, in one row of booleans in
// pinChecks' order, which kinds of pinning state the connection holds; user
// is the session's login, whose role SET ROLE is measured against.
func pinCheckQuery(user string) string {
	var sql strings.Builder
	sql.WriteString("SELECT ")
	for i, c := range pinChecks {
		if i > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString(c.expr)
		if c.bit == classify.SessionSetRole {
			sql.WriteString(quoteLiteral(user))
			sql.WriteString(")")
		}
	}
	return sql.String()
}

// pinCheckAnswer reads the check's DataRow: the kinds whose state remains.
// ok is false for a row that is not the check's answer.
func pinCheckAnswer(row []byte) (remaining classify.SessionEffect, ok bool) {
	values, ok := rowValues(row)
	if !ok || len(values) != len(pinChecks) {
		return 0, false
	}
	for i, v := range values {
		if v != "f" {
			remaining |= pinChecks[i].bit
		}
	}
	return remaining, true
}

// recheckPins asks be's node which kinds of pinning state the connection
// holds, if a unit may have changed that since the last check, and pins the
// session for exactly those. It runs only between transactions; an unusable
// connection is dropped (closing it releases everything it held).
func (sess *session) recheckPins(be *backend) {
	if be.broken || !sess.pins.checkDue(be.conn.TxStatus == wire.TxIdle && !be.openBatch && be.expect.len() == 0) {
		return
	}
	var remaining classify.SessionEffect
	answered := false
	code, err := sess.runOnBackend(be, pinCheckQuery(sess.user), func(row []byte) {
		if r, ok := pinCheckAnswer(row); ok {
			remaining, answered = r, true
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
	added, released := sess.pins.settle(remaining)
	if added != 0 {
		sess.log.Info().Str("node", be.node).Str("pinned_by", describePin(added)).Msg("session pinned to node")
	}
	if released != 0 {
		sess.log.Info().Str("node", be.node).Str("released", describePin(released)).Msg("session pin released")
		if released&(classify.SessionPrepare|classify.SessionTempTable) != 0 {
			// An SQL prepared statement may have been executed to change
			// settings (set_config) that pgowl did not follow, and so may the
			// triggers, rules and defaults of a temporary table, which is in no
			// catalogue pgowl reads: carry what the session has now.
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
