package classify

import (
	"strconv"
	"strings"
)

// SplitSearchPath splits a search_path value the way PostgreSQL's SplitIdentifierString does: elements
// are separated by commas, surrounding white space is dropped, unquoted names are folded to lower case
// and double-quoted names are kept as written (with "" standing for one quote). An element that cannot
// be read ends the list.
func SplitSearchPath(value string) []string {
	var out []string
	i := 0
	for len(out) < 256 {
		for i < len(value) && isSpace(value[i]) {
			i++
		}
		if i >= len(value) {
			break
		}
		var name string
		if value[i] == '"' {
			var b strings.Builder
			j := i + 1
			closed := false
			for j < len(value) {
				if value[j] == '"' {
					if j+1 < len(value) && value[j+1] == '"' {
						b.WriteByte('"')
						j += 2
						continue
					}
					closed = true
					j++
					break
				}
				b.WriteByte(value[j])
				j++
			}
			if !closed {
				return out
			}
			name = b.String()
			i = j
		} else {
			j := i
			for j < len(value) && value[j] != ',' && !isSpace(value[j]) {
				j++
			}
			name = strings.ToLower(value[i:j])
			i = j
		}
		for i < len(value) && isSpace(value[i]) {
			i++
		}
		if name != "" {
			out = append(out, name)
		}
		if i < len(value) {
			if value[i] != ',' {
				return out
			}
			i++
		}
	}
	return out
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// Context is what a statement's verdict may depend on besides its text: the database whose catalogue
// resolves names, the session's user and search_path, and the parameter types of a Parse message.
type Context struct {
	// Database is the session's database.
	Database string
	// User is the session's user; "$user" in the search path stands for it.
	User string
	// SearchPath is the session's search_path, one schema per element as PostgreSQL stores it; nil
	// means the database's default for User.
	SearchPath []string
	// SearchPathUnknown is set when the session changed search_path in a way that could not be read:
	// unqualified names then resolve only in pg_catalog, and other functions are unknown.
	SearchPathUnknown bool
	// ParamTypes are the parameter type OIDs a Parse message declared (0 = unspecified).
	ParamTypes []uint32
}

// env is the resolved context of one analysis: the schemas unqualified names are looked up in, in
// order, and the parameter types. The catalogue itself is in the run, because a lookup may replace it.
type env struct {
	database string
	user     string
	// path is the effective search path: "$user" expanded, pg_catalog placed where PostgreSQL
	// searches it (first unless the path names it elsewhere); pg_temp is left out.
	path    []string
	params  []uint32
	pathKey string
	// schemas is the search_path path was made of, "$user" not expanded: a body that runs as
	// another user expands it again (withSessionPathAs).
	schemas []string
	// createsInTemp: an unqualified CREATE makes a temporary object (see createsInTemp).
	createsInTemp bool
	// session resolves names with the path in force, without parameters: the session's, or
	// that of the nearest calling function with a SET search_path clause (which holds while the
	// function runs). Function bodies without a setting of their own use it, from a view too.
	session *env
}

// contextSchemas returns the search path of ctx as PostgreSQL stores it.
func contextSchemas(ctx *Context, cat *Catalogue) (schemas []string, user string) {
	if ctx != nil {
		user = ctx.User
		switch {
		case ctx.SearchPathUnknown:
			return []string{"pg_catalog"}, user
		case ctx.SearchPath != nil:
			return ctx.SearchPath, user
		case cat != nil:
			return cat.DefaultSearchPath(user), user
		}
	}
	return defaultSearchPath, user
}

var defaultSearchPath = []string{"$user", "public"}

// appendEffectivePath appends the effective path of schemas, each element followed by a NUL; it is
// the one definition of the effective path, shared by cache keys and name lookup.
func appendEffectivePath(buf []byte, schemas []string, user string) []byte {
	named := false
	for _, schema := range schemas {
		if schema == "pg_catalog" {
			named = true
			break
		}
	}
	if !named {
		buf = append(buf, "pg_catalog\x00"...)
	}
	for _, schema := range schemas {
		switch {
		case schema == "$user":
			if user != "" {
				buf = append(append(buf, user...), 0)
			}
		case isTempSchema(schema):
		default:
			buf = append(append(buf, schema...), 0)
		}
	}
	if createsInTemp(schemas) {
		buf = append(buf, tempCreationMark...)
	}
	return buf
}

// tempCreationMark ends an effective path whose unqualified CREATEs make temporary objects
// (createsInTemp), as an element of its own: no element of the path is pg_temp otherwise. The mark
// keeps such a path's verdicts apart from those of the same path without it, and is not a schema
// to look names up in. A path always holds pg_catalog, so the mark always follows an element, and
// setPath finds it with the NUL before it (a schema named app_pg_temp is not the mark).
const tempCreationMark = "pg_temp\x00"

func isTempSchema(schema string) bool {
	return schema == "pg_temp" || strings.HasPrefix(schema, "pg_temp_")
}

// createsInTemp reports whether PostgreSQL may create an unqualified table, view, sequence or
// function in the session's temporary schema on this search path: when pg_temp is the first
// schema of the path that exists. Such an object lives as long as the session, as one created
// TEMP does, so the answer errs toward yes (a session pinned for nothing only keeps its backend):
// public and pg_catalog are taken to exist, any other schema before pg_temp ("$user", a schema
// not created yet) to be possibly absent.
func createsInTemp(schemas []string) bool {
	for _, schema := range schemas {
		switch {
		case isTempSchema(schema):
			return true
		case schema == "public" || schema == "pg_catalog":
			return false
		}
	}
	return false
}

// newEnv resolves ctx against cat (which may be nil).
func newEnv(ctx *Context, cat *Catalogue) *env {
	var database string
	var params []uint32
	if ctx != nil {
		database, params = ctx.Database, ctx.ParamTypes
	}
	schemas, user := contextSchemas(ctx, cat)
	return pathEnv(database, user, params, schemas)
}

// pathEnv returns an env that resolves names in schemas, with them as the
// path in force (its session, which has no parameters).
func pathEnv(database, user string, params []uint32, schemas []string) *env {
	e := &env{database: database, user: user, params: params}
	e.setPath(schemas, user)
	e.session = &env{database: database, user: user, path: e.path, pathKey: e.pathKey, schemas: e.schemas, createsInTemp: e.createsInTemp}
	e.session.session = e.session
	return e
}

func (e *env) setPath(schemas []string, user string) {
	e.schemas = schemas
	key := appendEffectivePath(nil, schemas, user)
	e.pathKey = string(key)
	lookup := e.pathKey
	if strings.HasSuffix(lookup, "\x00"+tempCreationMark) {
		lookup, e.createsInTemp = strings.TrimSuffix(lookup, tempCreationMark), true
	} else {
		e.createsInTemp = false
	}
	e.path = nil
	if lookup != "" {
		e.path = strings.Split(strings.TrimSuffix(lookup, "\x00"), "\x00")
	}
}

// followSearchPath makes the analysis resolve names as after change, for the
// statements that follow a SET search_path in the same string, and for the
// function bodies they call that have no search_path of their own. A path
// that cannot be read, or a RESET to a startup value the classifier does not
// know, leaves only pg_catalog: user functions then resolve to nothing and
// stay on the primary.
func (a *analysis) followSearchPath(change *SearchPathChange) {
	schemas := []string{"pg_catalog"}
	if change.Known && !change.Reset {
		schemas = change.Schemas
	}
	a.env = pathEnv(a.env.database, a.env.user, a.env.params, schemas)
}

// withSessionPath returns an env that resolves names in schemas and makes
// them the path in force for everything called from it, as a function's SET
// search_path clause does while the function runs.
func (e *env) withSessionPath(schemas []string) *env {
	return pathEnv(e.database, e.user, nil, schemas).session
}

// withSessionPathAs is withSessionPath for a body that runs as user (a SECURITY DEFINER
// function's owner, a SET role): "$user" in schemas stands for that user, also in what the body
// calls.
func (e *env) withSessionPathAs(schemas []string, user string) *env {
	return pathEnv(e.database, user, nil, schemas).session
}

// withPath returns a copy of e that resolves names in schemas (a function's own search_path setting).
func (e *env) withPath(schemas []string) *env {
	copied := &env{database: e.database, user: e.user, session: e.session}
	copied.setPath(schemas, e.user)
	return copied
}

// appendContextKey appends the cache-key prefix of verdicts that depend on the context: the
// database, the catalogue version, the effective search path and the parameter types.
func appendContextKey(buf []byte, ctx *Context, cat *Catalogue) []byte {
	buf = append(buf, 0x01)
	var params []uint32
	if ctx != nil {
		buf = append(buf, ctx.Database...)
		params = ctx.ParamTypes
	}
	buf = append(buf, 0)
	version := uint64(0)
	if cat != nil {
		version = cat.version
	}
	buf = strconv.AppendUint(buf, version, 36)
	buf = append(buf, 0)
	schemas, user := contextSchemas(ctx, cat)
	buf = appendEffectivePath(buf, schemas, user)
	buf = append(buf, 0)
	for _, oid := range params {
		buf = strconv.AppendUint(buf, uint64(oid), 36)
		buf = append(buf, ',')
	}
	return append(buf, 0x02)
}
