package proxy

import (
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/wire"
)

// deallocatedName returns the statement name a string with effects eff
// deallocates when it is one DEALLOCATE [PREPARE] name (not DEALLOCATE ALL).
func deallocatedName(eff classify.Effects) (string, bool) {
	if eff.Statements != 1 || eff.Session&classify.SessionDeallocate == 0 || eff.Session&classify.SessionDeallocateAll != 0 || eff.Deallocates == "" {
		return "", false
	}
	return eff.Deallocates, true
}

// deallocateClientStatement answers a DEALLOCATE, sent as SQL, of a statement
// the client prepared with the extended protocol. On the nodes the statement
// has a managed name and may serve other sessions (see newStatement), so, as
// for a client's Close, only the client's name goes; PostgreSQL's DEALLOCATE
// does not take part in transactions, so the answer does not wait for one.
// (In a failed transaction the session sends the statement on: the node
// refuses it as PostgreSQL would.)
func (sess *session) deallocateClientStatement(name string) {
	sess.statements.close(name)
	sess.send(&pgproto3.CommandComplete{CommandTag: []byte("DEALLOCATE")})
	sess.sendReady()
	sess.log.Debug().Str("statement", name).Msg("DEALLOCATE of a protocol-level prepared statement answered by pgowl")
}

// answerDeallocateBatch answers a synced extended-protocol batch whose statements are each a lone
// DEALLOCATE of a statement the client prepared with the extended protocol, as psycopg 3 sends
// one when its cache of prepared statements evicts it (Parse, Bind, Describe, Execute, Sync):
// the node knows the statement under a managed name only and would answer 26000, so pgowl
// answers as deallocateClientStatement does for a simple Query, message by message. It reports
// whether it answered the batch.
func (sess *session) answerDeallocateBatch(stmts []*preparedStmt, synced bool) bool {
	if state := sess.txState(); !synced || len(stmts) == 0 || state.failed() || state == txOpenBatch || state == txOpenReadOnlyBatch {
		// A pipeline part open on a node: its Sync must reach the node, which commits it.
		return false
	}
	for _, st := range stmts {
		if name, ok := deallocatedName(st.effects); !ok || sess.statements.lookup(name) == nil {
			return false
		}
	}
	portals := map[string]*preparedStmt{}
	for i := range sess.batch.msgs {
		m := &sess.batch.msgs[i]
		switch m.typ {
		case wire.MsgParse:
			sess.statements.parse(m.stmt)
			sess.send(&pgproto3.ParseComplete{})
		case wire.MsgBind:
			portals[m.portal] = sess.statements.lookup(m.name)
			sess.send(&pgproto3.BindComplete{})
		case wire.MsgDescribe:
			if m.kind == wire.TargetStatement {
				sess.send(&pgproto3.ParameterDescription{})
			}
			sess.send(&pgproto3.NoData{})
		case wire.MsgExecute:
			if st := portals[m.portal]; st != nil {
				name, _ := deallocatedName(st.effects)
				sess.statements.close(name)
				sess.send(&pgproto3.CommandComplete{CommandTag: []byte("DEALLOCATE")})
				sess.log.Debug().Str("statement", name).Msg("DEALLOCATE of a protocol-level prepared statement, sent in the extended protocol, answered by pgowl")
			}
		case wire.MsgClose:
			if m.kind == wire.TargetStatement && m.name != "" {
				sess.statements.close(m.name)
			}
			sess.send(&pgproto3.CloseComplete{})
		case wire.MsgSync:
			sess.sendReady()
		}
	}
	return true
}
