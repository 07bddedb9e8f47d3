package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/route"
)

// nodeLoginRefusal is how a node refused a backend login that says "this node
// cannot serve this login now" rather than "this client may not log in".
type nodeLoginRefusal uint8

const (
	// nodeLoginAccepted: the error is not such a refusal (or there is none).
	nodeLoginAccepted nodeLoginRefusal = iota
	// nodeLoginNotReplayed: the role, its password, or the database is not on
	// the node (28P01, 28000, 3D000). On a standby it is usually one that
	// was just created on the primary and not replayed yet.
	nodeLoginNotReplayed
	// nodeLoginNotAccepting: the node is starting up, shutting down or not yet
	// accepting connections (57P03), as during a switchover.
	nodeLoginNotAccepting
)

// nodeRefusalOfLogin classifies a backend login error by its SQLSTATE.
func nodeRefusalOfLogin(err error) nodeLoginRefusal {
	pgErr := pool.PgError(err)
	if pgErr == nil {
		return nodeLoginAccepted
	}
	switch pgErr.Code {
	case "28P01", "28000", "3D000":
		return nodeLoginNotReplayed
	case "57P03", "57P01", "57P02":
		// Not accepting connections, or shutting down (a fast or immediate stop ends a login
		// under way with 57P01 or 57P02).
		return nodeLoginNotAccepting
	}
	return nodeLoginAccepted
}

// statementLoginRefusal turns a node's FATAL refusal of the backend login a statement needed
// (node, "" when not known) into an ERROR of the statement with the node's code: the client's
// own connection to pgowl is fine, and a FATAL would make the client close it. Other errors are
// returned as they are.
func statementLoginRefusal(err error, node string) error {
	pgErr := pool.PgError(err)
	if pgErr == nil || (pgErr.Severity != "FATAL" && pgErr.Severity != "PANIC") {
		return err
	}
	which := "a node"
	if node != "" {
		which = node
	}
	return &clientError{SQLState: pgErr.Code, Message: "pgowl: " + which + " refused the connection this statement needed: " + pgErr.Message,
		Detail: pgErr.Detail, Hint: "The session is kept: run the statement again."}
}

// maxNodeLoginRefusals bounds the refusals remembered across sessions.
const maxNodeLoginRefusals = 1024

// nodeLoginKey is what a refusal is remembered for: one login on one node.
type nodeLoginKey struct{ node, user, database string }

// nodeLoginRefusals remembers, for a short while, the standbys that refused a
// login (user, database), so that every read of a role just created does
// not try the standby that has not replayed it yet. A refusal because the
// role or database is not there holds until the standby has replayed the
// primary's WAL position seen when it refused (the monitor's snapshot shows
// it), but no longer than the lag limit (a standby still without it by then
// is behind the limit and serves no read); one because the node did not
// accept connections holds for notAcceptingMemory. A login there that
// succeeds ends it. The zero value is ready to use.
type nodeLoginRefusals struct {
	// count mirrors len(entries), so that the path where nothing was
	// refused takes no lock.
	count   atomic.Int32
	mu      sync.Mutex
	entries map[nodeLoginKey]nodeLoginRefused
}

// nodeLoginRefused is one remembered refusal.
type nodeLoginRefused struct {
	// until is when the refusal stops holding at the latest.
	until time.Time
	// replayPast: the refusal holds while the node's replay position is
	// below it; 0: until the time is up.
	replayPast route.LSN
}

// notAcceptingMemory is how long a standby that did not accept connections
// (57P03) is kept from the login's reads: the monitor sees a node that
// stays so as down soon after.
const notAcceptingMemory = time.Second

// remember records that k's node refused the login. When the table is full,
// expired entries go first; if it is still full the refusal is not
// remembered (the session that met it excludes the node anyway).
func (m *nodeLoginRefusals) remember(k nodeLoginKey, r nodeLoginRefused, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[nodeLoginKey]nodeLoginRefused{}
	}
	if _, ok := m.entries[k]; !ok && len(m.entries) >= maxNodeLoginRefusals {
		for key, e := range m.entries {
			if !e.until.After(now) {
				delete(m.entries, key)
			}
		}
		if len(m.entries) >= maxNodeLoginRefusals {
			return
		}
	}
	m.entries[k] = r
	m.count.Store(int32(len(m.entries)))
}

// refusedMask returns the standbys of snap that refused user's login to
// database and whose refusal still holds at now (bit i is snap.Nodes[i]).
func (m *nodeLoginRefusals) refusedMask(snap *route.Snapshot, user, database string, now time.Time) uint64 {
	if m.count.Load() == 0 {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var mask uint64
	for i := range snap.Nodes {
		if i >= 64 {
			break
		}
		n := &snap.Nodes[i]
		if n.Role != route.RoleStandby {
			continue
		}
		k := nodeLoginKey{n.Name, user, database}
		e, ok := m.entries[k]
		switch {
		case !ok:
		case e.until.After(now) && (e.replayPast == 0 || n.WALPosition < e.replayPast):
			mask |= 1 << uint(i)
		default:
			delete(m.entries, k)
		}
	}
	m.count.Store(int32(len(m.entries)))
	return mask
}

// forget drops the refusal of k: a login there succeeded.
func (m *nodeLoginRefusals) forget(k nodeLoginKey) {
	if m.count.Load() == 0 {
		return
	}
	m.mu.Lock()
	delete(m.entries, k)
	m.count.Store(int32(len(m.entries)))
	m.mu.Unlock()
}

// len returns how many refusals are remembered (expired ones included).
func (m *nodeLoginRefusals) len() int { return int(m.count.Load()) }
