package proxy

import (
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/route"
)

// backendSet is the session's backend connections, at most one per node: a
// short list (a session rarely holds more than one), searched by node name
// without hashing on every statement. In transaction pooling a session takes
// a backend for every unit, so the struct of one it gave back is kept and
// reused, with its expectation queue. It never takes the session: which
// backend the session must stay on (session.held) and how a connection goes
// back to the pool are the session's.
type backendSet struct {
	list []*backend
	// spare is a released backend struct, reused by the next add.
	spare *backend
}

// on returns the connection to node, or nil.
func (s *backendSet) on(node string) *backend {
	for _, be := range s.list {
		if be.node == node {
			return be
		}
	}
	return nil
}

// add enters the pooled connection c to node, where the session acts in role.
func (s *backendSet) add(c *pool.Conn, node string, role route.Role) *backend {
	be := s.spare
	if be == nil {
		be = &backend{}
	}
	s.spare = nil
	*be = backend{
		conn:    c,
		node:    node,
		role:    role,
		running: runningStatement{node: node, network: c.Network, address: c.Address, pid: c.PID, secret: c.Secret},
		expect:  expectQueue{items: be.expect.items[:0]},
	}
	s.list = append(s.list, be)
	return be
}

// forget removes be from the set.
func (s *backendSet) forget(be *backend) {
	for i, other := range s.list {
		if other == be {
			last := len(s.list) - 1
			s.list[i] = s.list[last]
			s.list[last] = nil
			s.list = s.list[:last]
			return
		}
	}
}

// keepSpare keeps the struct of a backend whose connection went back to the
// pool (and was forgotten), for the next add.
func (s *backendSet) keepSpare(be *backend) {
	be.conn = nil
	s.spare = be
}

// empty forgets every connection, once they went back to the pool.
func (s *backendSet) empty() {
	clear(s.list)
	s.list = s.list[:0]
}

// reset follows a DISCARD ALL that ran on be's connection: nothing pgowl
// left there remains, neither prepared statements nor settings, and the
// connection's record says so for the next session that gets it.
func (be *backend) reset() {
	be.forgetPrepared()
	*be.settings() = connSettings{}
}

// forgetPrepared follows a DEALLOCATE ALL (or DISCARD ALL) that ran on be's
// connection: it holds no prepared statement, named or unnamed.
func (be *backend) forgetPrepared() {
	be.statements().forgetAll()
}

// settings is pgowl's record of the settings be's connection carries,
// which stays with the connection in the pool (connection_settings.go).
func (be *backend) settings() *connSettings { return settingsOn(be.conn) }

// statements is pgowl's record of the statements prepared on be's
// connection, which stays with the connection in the pool (server_statements.go).
func (be *backend) statements() *serverStatements { return statementsOn(be.conn) }

// unnamedID returns the id of the statement be's connection holds as its
// unnamed statement, 0 when none pgowl knows of.
func (be *backend) unnamedID() uint64 {
	return be.statements().unnamedID(be.conn.QueriesSent())
}

// markUnnamed records that the statement id (0: none) is now be's unnamed
// statement, as pgowl just parsed or closed it there, and returns the mark
// it replaces, for restoreUnnamed.
func (be *backend) markUnnamed(id uint64) (replaced unnamedMark) {
	s := be.statements()
	replaced, s.unnamed = s.unnamed, unnamedMark{id: id, queries: be.conn.QueriesSent()}
	return replaced
}

// restoreUnnamed puts back a mark markUnnamed replaced, because the node
// skipped what replaced it. A simple Query sent since still counts.
func (be *backend) restoreUnnamed(m unnamedMark) { be.statements().unnamed = m }
