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
	sess.answerBatchLocally(func(*preparedStmt) { sess.send(&pgproto3.NoData{}) }, func(st *preparedStmt) bool {
		name, _ := deallocatedName(st.effects)
		sess.statements.close(name)
		sess.send(&pgproto3.CommandComplete{CommandTag: []byte("DEALLOCATE")})
		sess.log.Debug().Str("statement", name).Msg("DEALLOCATE of a protocol-level prepared statement, sent in the extended protocol, answered by pgowl")
		return true
	})
	return true
}

// answerBatchLocally answers the current extended-protocol batch message by message as a server
// would, for a batch whose every statement pgowl answers itself: Parse, Bind and Close as
// PostgreSQL does (a Close of a statement forgets it), describe for a Describe (after the
// ParameterDescription of a statement) and execute for an Execute of a bound portal, each given
// the statement the message concerns (nil for an unknown portal in a Describe). It stops when
// execute returns false (execute has then ended the batch).
func (sess *session) answerBatchLocally(describe func(st *preparedStmt), execute func(st *preparedStmt) bool) {
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
			st := portals[m.name]
			if m.kind == wire.TargetStatement {
				st = sess.statements.lookup(m.name)
				sess.send(&pgproto3.ParameterDescription{})
			}
			describe(st)
		case wire.MsgExecute:
			if st := portals[m.portal]; st != nil && !execute(st) {
				return
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
}
