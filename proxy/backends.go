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
		running: runningStatement{node: node, addr: c.Addr, pid: c.PID, secret: c.Secret},
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
