package proxy

import (
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/classify"
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
