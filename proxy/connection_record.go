package proxy

import "github.com/pgowl/pgowl/pool"

// serverStatements is what pgowl left prepared on one backend connection:
// the managed names of the named statements prepared there (by any session,
// see managedNames, and pgowl's own catalogue reads), and which statement is
// its unnamed statement. It is part of the connection's record (connRecord),
// so it goes back to the pool with the connection and the next session that
// gets it knows what it holds. It does no I/O; a backend
// (backends.go) reads and writes it for the session that has the
// connection now.
type serverStatements struct {
	prepared map[string]struct{}
	// unnamed is the unnamed statement as pgowl last parsed or closed it.
	unnamed unnamedMark
}

// unnamedMark says which statement a connection holds as its unnamed
// statement: a statement's id (0: none known), and the connection's count of
// simple Queries (pool.Conn.QueriesSent) when pgowl parsed it there. A
// simple Query drops the unnamed statement, whoever sends it (a session, or
// the pool's health check), so the mark holds only while the count is the same.
type unnamedMark struct {
	id      uint64
	queries uint64
}

// connRecord is what pgowl left on one backend connection: the statements
// prepared there and the settings it carries. It lives in the connection's
// pool.Conn.Attached slot, which the pool never reads: it goes back to the
// pool with the connection, and goes with it when the connection is closed.
type connRecord struct {
	statements serverStatements
	settings   connSettings
}

// recordOf returns pgowl's record of c, attaching an empty one to a
// connection that has none yet (a new connection: no statements, no
// settings on top of its startup parameters).
func recordOf(c *pool.Conn) *connRecord {
	if r, ok := c.Attached.(*connRecord); ok {
		return r
	}
	r := &connRecord{statements: serverStatements{prepared: make(map[string]struct{})}}
	c.Attached = r
	return r
}

// statementsOn returns pgowl's record of the statements on c.
func statementsOn(c *pool.Conn) *serverStatements { return &recordOf(c).statements }

// settingsOn returns pgowl's record of the settings c carries.
func settingsOn(c *pool.Conn) *connSettings { return &recordOf(c).settings }

// holds reports whether the named statement serverName is prepared on the connection.
func (s *serverStatements) holds(serverName string) bool {
	_, ok := s.prepared[serverName]
	return ok
}

// add records that serverName was prepared on the connection.
func (s *serverStatements) add(serverName string) { s.prepared[serverName] = struct{}{} }

// drop records that serverName is not (or may not be) prepared on the connection.
func (s *serverStatements) drop(serverName string) { delete(s.prepared, serverName) }

// count is the number of named statements prepared on the connection.
func (s *serverStatements) count() int { return len(s.prepared) }

// unnamedID returns the id of the statement the connection holds as its
// unnamed statement, given the connection's count of simple Queries now; 0
// when it holds none pgowl knows of.
func (s *serverStatements) unnamedID(queriesSent uint64) uint64 {
	if s.unnamed.queries != queriesSent {
		return 0
	}
	return s.unnamed.id
}

// forgetAll follows DEALLOCATE ALL or DISCARD ALL on the connection: it
// holds no prepared statement, named or unnamed.
func (s *serverStatements) forgetAll() {
	clear(s.prepared)
	s.unnamed = unnamedMark{}
}
