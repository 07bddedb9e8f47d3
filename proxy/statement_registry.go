package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/wire"
)

// preparedStmt is a statement the client prepared with Parse.
type preparedStmt struct {
	id         uint64 // unique in the process
	name       string // the client's name
	serverName string // the name on backend connections (named statements only)
	// generationKey identifies the statement (text, parameter types, search_path) across
	// generations of serverName (see managedNames.serverName).
	generationKey string
	sql           string
	paramTypes    []uint32
	frame         []byte // the Parse frame sent to a backend, to prepare it anywhere
	effects       classify.Effects
}

// statementRegistry is one client's prepared statements under the client's
// own names: what a Bind, Describe or Close of a name finds, and whether a
// Parse of a name must be refused. It does no I/O and knows no backend:
// which connections hold a statement is theirs (serverStatements).
//
// A statement's life in the registry, as PostgreSQL gives it to a client on
// its own connection:
//   - parse enters a client's Parse. A named Parse of a name in use is
//     refused (duplicate, 42P05) before it gets here; an unnamed Parse
//     replaces the unnamed statement. parse returns the statement replaced.
//   - undoParse takes back a Parse the node skipped (an earlier error in the
//     batch) or refused: the statement it replaced comes back, except for a
//     refused unnamed Parse, after which there is no unnamed statement at all.
//   - close removes a statement (a client's Close, or DEALLOCATE sent as SQL);
//     restore brings it back when the node skipped the Close.
//   - forgetUnnamed follows a simple Query, which drops the unnamed statement.
//   - forgetAll follows DISCARD ALL and DEALLOCATE ALL.
type statementRegistry struct {
	named   map[string]*preparedStmt
	unnamed *preparedStmt
}

// managedStatementPrefix begins the names pgowl prepares statements under on the nodes, where
// every session of a login that prepares the same statement shares them.
const managedStatementPrefix = "pgowl_"

// lookup returns the statement the client calls name ("": the unnamed one), or nil.
func (r *statementRegistry) lookup(name string) *preparedStmt {
	if name == "" {
		return r.unnamed
	}
	return r.named[name]
}

// duplicate returns the statement a Parse of name would collide with: the
// client's statement of that name, which PostgreSQL keeps while it refuses
// the Parse with 42P05 (duplicate_prepared_statement). The unnamed
// statement is never a duplicate: a Parse of it replaces it.
func (r *statementRegistry) duplicate(name string) *preparedStmt {
	if name == "" {
		return nil
	}
	return r.named[name]
}

// parse enters st under its client name and returns the statement it replaced, if any.
func (r *statementRegistry) parse(st *preparedStmt) (replaced *preparedStmt) {
	if st.name == "" {
		replaced, r.unnamed = r.unnamed, st
		return replaced
	}
	if r.named == nil {
		r.named = make(map[string]*preparedStmt)
	}
	replaced = r.named[st.name]
	r.named[st.name] = st
	return replaced
}

// undoParse takes back the Parse that entered st in place of replaced,
// because the node skipped it, or ran it and refused it (refused). PostgreSQL
// drops the unnamed statement before it parses a new one, so a refused
// unnamed Parse leaves none. A statement entered since st stays.
func (r *statementRegistry) undoParse(st, replaced *preparedStmt, refused bool) {
	if st.name == "" {
		if r.unnamed == st {
			if refused {
				replaced = nil
			}
			r.unnamed = replaced
		}
		return
	}
	if r.named[st.name] != st {
		return
	}
	if replaced == nil {
		delete(r.named, st.name)
	} else {
		r.named[st.name] = replaced
	}
}

// close removes the client's statement name ("": the unnamed one) and
// returns it (nil when the client has none of that name).
func (r *statementRegistry) close(name string) *preparedStmt {
	if name == "" {
		st := r.unnamed
		r.unnamed = nil
		return st
	}
	st := r.named[name]
	delete(r.named, name)
	return st
}

// restore brings back st, which a Close removed, because the node skipped
// the Close; a statement of its name entered since stays.
func (r *statementRegistry) restore(st *preparedStmt) {
	switch {
	case st == nil:
	case st.name == "":
		if r.unnamed == nil {
			r.unnamed = st
		}
	case r.named[st.name] == nil:
		if r.named == nil {
			r.named = make(map[string]*preparedStmt)
		}
		r.named[st.name] = st
	}
}

// forgetUnnamed follows a simple Query: PostgreSQL drops the unnamed statement.
func (r *statementRegistry) forgetUnnamed() { r.unnamed = nil }

// forgetAll follows DISCARD ALL or DEALLOCATE ALL: no statement remains.
func (r *statementRegistry) forgetAll() {
	clear(r.named)
	r.unnamed = nil
}

// count is the number of the client's named statements.
func (r *statementRegistry) count() int { return len(r.named) }

// size is the bytes of the client's named statements' Parse frames, which
// the session keeps to prepare them anywhere.
func (r *statementRegistry) size() int {
	total := 0
	for _, st := range r.named {
		total += len(st.frame)
	}
	return total
}

// managedNames names client statements on backend connections, for the
// whole server: it gives every statement an id unique in the process, and
// a named statement a managed name that any backend connection, whichever
// session prepared it there, can run it under. Its zero value is ready.
//
// A managed name is derived from the statement's text, parameter types and
// the scope it was parsed in (statementScope). It has generations: after a
// node refused the statement (0A000, "cached plan must not change result
// type", when a table changed under it) retire moves the name on, so that
// the client's re-prepare gets a fresh statement on every backend.
type managedNames struct {
	seq atomic.Uint64
	// generations counts, per statement (generationKey), how often the
	// statement's managed name was retired; absent: never.
	generations sync.Map
}

// statementScope is what, besides its text and parameter types, decides
// whether two sessions' statements are the same: the same text means the
// same statement only under the same search_path (a table name may resolve
// to another table), and a session whose search_path is unknown shares with
// no one.
type statementScope struct {
	searchPath        []string
	searchPathUnknown bool
	session           uint64 // the session's id, for an unknown search_path
}

// newStatement builds the statement of a client's Parse (pm, decoded from
// body): its id, managed name and the Parse frame that prepares it on a
// backend connection. Its effects are the caller's to classify.
func (m *managedNames) newStatement(pm parseMessage, body []byte, scope statementScope) *preparedStmt {
	// The id Add returns is this statement's alone; a Load after it could
	// see another session's increment and share its id.
	st := &preparedStmt{id: m.seq.Add(1), name: pm.name, sql: pm.query, paramTypes: pm.paramTypes}
	if pm.name == "" {
		st.frame = appendFrame(make([]byte, 0, len(body)+wire.HeaderSize), wire.MsgParse, body)
		return st
	}
	st.serverName, st.generationKey = m.serverName(pm, scope)
	rest := body[len(pm.name)+1:] // query, parameter count and types, as the client sent them
	n := len(st.serverName) + 1 + len(rest)
	st.frame = wire.AppendHeader(make([]byte, 0, n+wire.HeaderSize), wire.MsgParse, n)
	st.frame = append(append(append(st.frame, st.serverName...), 0), rest...)
	return st
}

// serverName returns the managed name of a client's named statement in its
// current generation, and the key that identifies the statement across
// generations.
func (m *managedNames) serverName(pm parseMessage, scope statementScope) (name, generationKey string) {
	h := sha256.New()
	h.Write([]byte(pm.query))
	var oid [4]byte
	for _, t := range pm.paramTypes {
		binary.BigEndian.PutUint32(oid[:], t)
		h.Write(oid[:])
	}
	h.Write([]byte{0})
	if scope.searchPathUnknown {
		var id [8]byte
		binary.BigEndian.PutUint64(id[:], scope.session)
		h.Write([]byte("\x00session"))
		h.Write(id[:])
	} else {
		for _, schema := range scope.searchPath {
			h.Write([]byte(schema))
			h.Write([]byte{0})
		}
	}
	base := hex.EncodeToString(h.Sum(nil)[:16])
	if gen, ok := m.generations.Load(base); ok {
		return managedStatementPrefix + base[:24] + "_" + strconv.FormatUint(uint64(gen.(uint32)), 10), base
	}
	return managedStatementPrefix + base, base
}

// retire makes later prepares of st's statement use a new managed name.
func (m *managedNames) retire(st *preparedStmt) {
	if st.generationKey == "" {
		return
	}
	for {
		cur, loaded := m.generations.LoadOrStore(st.generationKey, uint32(1))
		if !loaded || m.generations.CompareAndSwap(st.generationKey, cur, cur.(uint32)+1) {
			return
		}
	}
}
