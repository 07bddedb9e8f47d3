package classify

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// Function is one row of pg_proc as the classifier needs it. The catalog package fills it from a
// database; tests may build it by hand.
type Function struct {
	// OID is pg_proc.oid.
	OID uint32
	// Schema and Name are the function's namespace and name, exactly as stored.
	Schema, Name string
	// Language is pg_language.lanname: "sql", "plpgsql", "c", "internal", ...
	Language string
	// Volatility is provolatile: 'i' (IMMUTABLE), 's' (STABLE) or 'v' (VOLATILE).
	Volatility byte
	// Kind is prokind: 'f' function, 'p' procedure, 'a' aggregate, 'w' window function.
	Kind byte
	// ReturnsSet is proretset.
	ReturnsSet bool
	// Source is prosrc: the body of SQL and PL/pgSQL functions, a symbol name for C functions.
	Source string
	// SQLBody is the whole CREATE statement (pg_get_functiondef) of an SQL function written with
	// BEGIN ATOMIC, whose body is stored parsed (prosqlbody) and already bound to its objects; else "".
	SQLBody string
	// ArgTypes are the input argument type OIDs (proargtypes).
	ArgTypes []uint32
	// ArgTypeNames are format_type of ArgTypes, for display: "integer", "text".
	ArgTypeNames []string
	// ArgNames are the names of the input arguments, in order ("" for an unnamed one); empty when
	// none is named. A call in named notation (f(b => 1)) can only run a function with those names.
	ArgNames []string
	// Defaults is pronargdefaults: how many trailing input arguments may be omitted.
	Defaults int
	// DefaultExprs is pg_get_expr(proargdefaults) read with search_path = pg_catalog: the default
	// expressions, comma-separated and qualified, which PostgreSQL evaluates in the caller; "" if none.
	DefaultExprs string
	// Variadic is true when the last input argument is VARIADIC.
	Variadic bool
	// Arguments is pg_get_function_arguments: the argument list with names, modes and defaults, used to
	// rebuild a CREATE FUNCTION statement for the PL/pgSQL parser.
	Arguments string
	// Result is pg_get_function_result: "integer", "SETOF record", "TABLE(a integer)"; "" for procedures.
	Result string
	// Config is proconfig: "name=value" settings the function runs with, such as "search_path=app, public".
	Config []string
	// Comment is the function's comment (obj_description); the directives pgowl:readonly and
	// pgowl:writes in it are assertions about this exact signature.
	Comment string
	// Override is an assertion from configuration (classify.functions): "readonly", "writes" or "".
	Override string
	// Calls lists other functions an aggregate runs (its transition, final and combine functions).
	Calls []uint32
	// DefinerUser is the owner of a SECURITY DEFINER function, whose privileges and name ("$user"
	// on the search_path) its body runs with; empty otherwise.
	DefinerUser string
}

// Signature renders the function as name(argtypes), qualified unless its schema is public or pg_catalog.
func (f *Function) Signature() string {
	name := quoteIdent(f.Name)
	if f.Schema != "" && f.Schema != "public" && f.Schema != "pg_catalog" {
		name = quoteIdent(f.Schema) + "." + name
	}
	return name + "(" + strings.Join(f.ArgTypeNames, ", ") + ")"
}

// directive returns the pgowl assertion on this function: "writes" wins over "readonly", and the
// configuration and the comment are both consulted. source says where it came from.
func (f *Function) directive() (kind, source string) {
	commentKind := commentDirective(f.Comment)
	switch {
	case f.Override == "writes":
		return "writes", "classify.functions.writes"
	case commentKind == "writes":
		return "writes", "COMMENT ON FUNCTION ... 'pgowl:writes'"
	case f.Override == "readonly":
		return "readonly", "classify.functions.readonly"
	case commentKind == "readonly":
		return "readonly", "COMMENT ON FUNCTION ... 'pgowl:readonly'"
	}
	return "", ""
}

// commentDirective finds pgowl:readonly or pgowl:writes in a comment, as whole words in any case;
// writes wins when both appear.
func commentDirective(comment string) string {
	if comment == "" {
		return ""
	}
	lower := strings.ToLower(comment)
	found := ""
	for start := 0; start < len(lower); {
		at := strings.Index(lower[start:], "pgowl:")
		if at < 0 {
			break
		}
		at += start
		rest := lower[at+len("pgowl:"):]
		end := 0
		for end < len(rest) && (isASCIILetter(rest[end]) || rest[end] == '_') {
			end++
		}
		before := at == 0 || !isIdentByte(lower[at-1])
		switch word := rest[:end]; {
		case !before:
		case word == "writes":
			return "writes"
		case word == "readonly":
			found = "readonly"
		}
		start = at + len("pgowl:")
	}
	return found
}

// searchPathSetting returns the search_path a function runs with (proconfig), if it sets one.
func (f *Function) searchPathSetting() ([]string, bool) {
	for _, setting := range f.Config {
		name, value, ok := strings.Cut(setting, "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "search_path") {
			return SplitSearchPath(value), true
		}
	}
	return nil, false
}

// runsAs returns the user the function's body runs as when that is not its caller: the role its
// SET role clause names, else, for a SECURITY DEFINER function, its owner; "" otherwise.
// PostgreSQL applies the SET clauses after it switches to the owner, so a role set wins.
func (f *Function) runsAs() string {
	for _, setting := range f.Config {
		name, value, ok := strings.Cut(setting, "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "role") {
			value = strings.TrimSpace(value)
			if unquoted, err := strconv.Unquote(value); err == nil && strings.HasPrefix(value, `"`) {
				value = unquoted
			}
			if !strings.EqualFold(value, "none") {
				return value
			}
		}
	}
	return f.DefinerUser
}

// refusedSetting reports a SET clause of the function that a standby refuses as it enters the
// function, whatever the body does: transaction_read_only = off, or a serializable
// transaction_isolation ("transaction read-write mode must be set before any query").
func (f *Function) refusedSetting() (string, bool) {
	for _, setting := range f.Config {
		name, value, ok := strings.Cut(setting, "=")
		if !ok {
			continue
		}
		if _, refused := refusedTransactionSetting(strings.ToLower(strings.TrimSpace(name)), []settingValue{{text: value, ok: true}}); refused {
			return "SET " + strings.TrimSpace(name) + " = " + value, true
		}
	}
	return "", false
}

// View is one view (pg_class.relkind 'v') with its definition.
type View struct {
	// OID is the view's pg_class.oid.
	OID uint32
	// Schema and Name identify the view.
	Schema, Name string
	// Definition is pg_get_viewdef, read with search_path = pg_catalog so that every other object is qualified.
	Definition string
	// query is the query of a view taken from its CREATE statement (Catalogue.TakeCreated), with
	// Definition empty: its names resolve along path, the effective search_path it was made
	// under (each schema followed by a NUL). nil for a view read from the node.
	query *pg_query.Node
	path  string
}

// display renders the view for a chain.
func (v *View) display() string {
	if v.Schema == "public" || v.Schema == "pg_catalog" {
		return "view " + quoteIdent(v.Name)
	}
	return "view " + quoteIdent(v.Schema) + "." + quoteIdent(v.Name)
}

// Relation is a table-like object's kind: pg_class.relkind ('r', 'v', 'm', 'f', 'p', 'S', ...).
type Relation struct {
	Schema, Name string
	Kind         byte
	// Unlogged is relpersistence 'u', or a partition or inheritance child that is: its data is not
	// replicated, and a standby refuses to read it.
	Unlogged bool
	// OID is pg_class.oid.
	OID uint32
	// ReadPolicy lists, comma-separated and each in parentheses, the USING expressions of the
	// row security policies that reading the table runs (FOR SELECT and FOR ALL), when row
	// security is enabled on it; empty otherwise. Read with search_path = pg_catalog, so every
	// other name in them is qualified.
	ReadPolicy string
	// WriteRuns lists, comma-separated and each in parentheses, what a write to the relation runs
	// besides the statement itself: a call of each enabled trigger's function (with no
	// arguments, as trigger functions are declared), its columns' defaults and generation
	// expressions, and its CHECK constraints. Read with search_path = pg_catalog, so every other
	// name in them is qualified. Empty when none. The analysis takes only their session effects
	// from it (a write goes to the primary whatever it runs).
	WriteRuns string
	// WriteRule is set when a rule other than a view's runs on INSERT, UPDATE or DELETE of the
	// relation: its actions are statements the analysis does not follow, so the session's state
	// after such a write is asked of the node.
	WriteRule bool
	// Reaches lists, by OID, the tables a write of this one may write as well, whose own
	// WriteRuns then run: its partitions and inheritance children (rows routed to them, an
	// UPDATE or DELETE of the parent), and the tables whose foreign keys reference it (ON DELETE
	// or ON UPDATE CASCADE, SET NULL, SET DEFAULT, TRUNCATE ... CASCADE).
	Reaches []uint32
}

// writes reports whether a write to r may run more than the statement (WriteRuns, WriteRule,
// Reaches).
func (r *Relation) writes() bool { return r.WriteRuns != "" || r.WriteRule || len(r.Reaches) > 0 }

// Type is one pg_type row, for resolving casts when overloads are chosen.
type Type struct {
	OID          uint32
	Schema, Name string
	// Kind is typtype: 'b' base, 'c' composite (a table's row type too), 'd' domain, 'e' enum,
	// 'p' pseudo, 'r' range, 'm' multirange.
	Kind byte
	// Base is a domain's base type (typbasetype), else 0.
	Base uint32
	// Check lists, comma-separated and each in parentheses, a domain's own CHECK expressions
	// (VALUE stands for the value), which run wherever a value becomes of the domain: a cast,
	// an argument of a function that takes the domain. Read with search_path = pg_catalog, so
	// every other name in them is qualified; "" when none.
	Check string
}

// Operator is an operator outside pg_catalog and the function it runs (pg_operator.oprcode).
type Operator struct {
	Schema, Name string
	// Function is the OID of the function the operator runs. BuiltinFunction is its name when it
	// is a pg_catalog function (judged by the built-in tables), else "".
	Function        uint32
	BuiltinFunction string
	// Negator and Commutator are the functions of the operator's negator and commutator when they
	// are outside pg_catalog, else 0: the planner may run them instead (NOT (a = b) becomes a <> b).
	Negator, Commutator uint32
}

// Cast is a cast that runs a function outside pg_catalog (pg_cast.castfunc).
type Cast struct {
	Source, Target uint32
	Function       uint32
}

// FieldCast says that a composite type has a field whose type is the target of a Cast: ROW(...)::t
// may run that cast to convert the field.
type FieldCast struct {
	Composite, Target uint32
}

// CatalogueData is what a catalogue is built from.
type CatalogueData struct {
	// Database is the database the data was read from.
	Database string
	// Functions are the functions of every schema except pg_catalog (whose functions the built-in tables cover).
	Functions []Function
	// Views are the views of every schema except pg_catalog and information_schema.
	Views []View
	// Relations are all relations, including those of pg_catalog, so that name resolution can tell
	// which schema on the search path holds a name.
	Relations []Relation
	// Types are the types of every schema, for casts.
	Types []Type
	// Operators are the operators outside pg_catalog, whose functions an expression runs without
	// naming them.
	Operators []Operator
	// Casts are the casts that run a function outside pg_catalog.
	Casts []Cast
	// FieldCasts are the composite types with a field of a type that Casts convert to.
	FieldCasts []FieldCast
	// DefaultSearchPath is the search_path a new session of each role gets before startup parameters,
	// keyed by role name, with "" for roles without a role-specific setting.
	DefaultSearchPath map[string][]string
	// LoginDefaults are the settings ALTER ROLE and ALTER DATABASE ... SET give a login to this
	// database (pg_db_role_setting rows of this database or of every one), one per setting as
	// "role@database: name=value" ("*" for every role or every database), sorted. A backend
	// keeps the ones of its login: when they change, pooled backends are replaced
	// (Options.DefaultsChanged of catalog.Manager).
	LoginDefaults []string
	// Schemas are the names of every schema, sorted, as the last read found them (a whole read,
	// or a read by name, which reads them too; nil when not read): where an unqualified CREATE
	// makes its object (CreatedFunction).
	Schemas []string
	// LoadedAt is when the data was read.
	LoadedAt time.Time
	// Warnings are problems met while loading, such as configured overrides that name no function.
	Warnings []string
}

// Catalogue is an immutable view of one database's functions, views and relations, with the
// function analyses done so far (memoised per function and search path). Build one with NewCatalogue.
type Catalogue struct {
	data    CatalogueData
	version uint64
	// The indexes of the data that patches change are layered: shared with the catalogues
	// derived from this one, each holding the changes since (see layered).
	funcs layered[qualified, []*Function]
	byOID layered[uint32, *Function]
	// byFirstArg lists the functions whose first argument is of a type made after initdb
	// (firstUserOID on), by that type, ordered by OID: those a row type that appears or goes may
	// make callable in attribute notation (deriveRowFunctions). The types of initdb, which never
	// appear or go, are left out, so that the thousands of functions taking integer or text
	// cost no list copied per function added.
	byFirstArg layered[uint32, []*Function]
	views      layered[qualified, *View]
	rels       layered[qualified, byte]
	types      layered[qualified, *Type]
	// unlogged holds the unlogged relations.
	unlogged layered[qualified, bool]
	// readPolicies holds the tables whose row security policies run when they are read.
	readPolicies layered[qualified, *Relation]
	// writeRuns holds the relations whose writes run triggers, defaults, CHECK constraints or
	// rules, or reach other tables (Relation.writes), by name and by OID.
	writeRuns      layered[qualified, *Relation]
	writeRunsByOID layered[uint32, *Relation]
	// operators indexes Operators by schema and name.
	operators map[qualified][]*Operator
	// castsTo lists the casts to a type (by target OID).
	castsTo map[uint32][]Cast
	// rowTypes holds the composite types (tables' row types too).
	rowTypes layered[uint32, bool]
	// domainBase maps a domain to its base type: casts to and from a domain are those of its base.
	domainBase layered[uint32, uint32]
	// domainChecks holds the domains with CHECK constraints, by OID.
	domainChecks layered[uint32, *Type]
	// fieldCastTargets lists, per composite type, the types of its fields that Casts convert to.
	fieldCastTargets layered[uint32, []uint32]
	// rowFunctions are the functions, by name, that attribute notation may call: r.f runs f(r)
	// when f takes one argument of a row type (or of a polymorphic or record type).
	rowFunctions layered[string, []*Function]
	// schemas are the schemas of the functions, views, relations and types held, and of those
	// held by the catalogues this one was derived from (see HoldsAnyNamed).
	schemas heldSchemas
	memo    sync.Map // memoKey -> fnResult
	// kept are the analyses KeepAnalysesFrom carried from the catalogues this one was derived
	// from, newest layer first; set before the catalogue is in use and never modified after, so
	// read without a lock. memo, where later analyses go, is looked at first.
	kept []keptLayer
	// keptStep numbers c in the chain of catalogues KeepAnalysesFrom linked (0: c was not derived
	// so), and changedAt holds the step of the last change of each name changed along it.
	keptStep  uint64
	changedAt layered[string, uint64]
	missMu    sync.Mutex
	misses    map[string]bool // names looked up in vain since this catalogue was loaded
	// rooms are the room past the end of each part's slice of data, which the Appended methods
	// let one derivation append to in place; catalogues that share a slice share its room.
	rooms [dataParts]*room
	// checksum is computed on first use (only reloads compare catalogues).
	checksumOnce sync.Once
	checksum     string
}

type qualified struct{ schema, name string }

var catalogueVersions atomic.Uint64

// NewCatalogue indexes data. Every catalogue gets a new Version, which cache keys include.
func NewCatalogue(data CatalogueData) *Catalogue {
	c := newCatalogue(data)
	for part := range c.rooms {
		// Whose the room past data's ends is, is not known: the first patch copies.
		c.rooms[part].taken.Store(true)
	}
	return c
}

// NewCatalogueOwning is NewCatalogue for data that nothing else holds (as read by a whole load):
// the first patch may append to its slices in place (see AppendedFunctions).
func NewCatalogueOwning(data CatalogueData) *Catalogue {
	return newCatalogue(data)
}

// newCatalogue indexes data, with the room past its slices' ends free.
func newCatalogue(data CatalogueData) *Catalogue {
	c := &Catalogue{data: data, version: catalogueVersions.Add(1), misses: make(map[string]bool)}
	for part := range c.rooms {
		c.rooms[part] = &room{}
	}
	c.indexFunctions()
	c.indexRelations()
	c.indexTypes()
	c.indexOperatorsAndCasts()
	c.indexRowFunctions()
	c.indexSchemas()
	return c
}

// CatalogueParts says which parts of a catalogue's data changed (see CatalogueDelta).
type CatalogueParts struct {
	Functions, Relations, Types bool
	// Schemas: the list of every schema (CatalogueData.Schemas) differs.
	Schemas bool
}

// CatalogueDelta is what patching a catalogue's data changed: which parts differ, and per part the
// objects taken out of the old data and those put in (an object replaced is in both). DeriveCatalogue
// updates the old catalogue's indexes with it. The slices are owned by the delta: the derived
// catalogue's indexes point into Added*, which must not be modified afterwards.
type CatalogueDelta struct {
	// Parts says which parts of the data differ from the old data (Warnings count as Functions).
	Parts CatalogueParts
	// RemovedFunctions and AddedFunctions are the functions taken out and put in.
	RemovedFunctions, AddedFunctions []Function
	// RemovedViews and AddedViews are the views taken out and put in.
	RemovedViews, AddedViews []View
	// RemovedRelations and AddedRelations are the relations taken out and put in.
	RemovedRelations, AddedRelations []Relation
	// RemovedTypes and AddedTypes are the types taken out and put in.
	RemovedTypes, AddedTypes []Type
	// RemovedFieldCasts and AddedFieldCasts are the composite fields taken out and put in.
	RemovedFieldCasts, AddedFieldCasts []FieldCast
}

// Changed reports whether the data differs from the old data at all.
func (d *CatalogueDelta) Changed() bool { return d.Parts != CatalogueParts{} }

// DeriveCatalogue indexes data, which is old's data with delta's removed objects taken out and its
// added ones put in (Operators and Casts unchanged), each part ordered by OID as the loader reads
// it and patching keeps it (field casts by composite, then target). It answers every lookup as
// NewCatalogue(data) would, at a cost that grows with delta, not with the catalogue: each index
// delta touches is old's, shared, with the entries of the removed objects replaced by those of
// the added ones in a layer of changes (see layered: a number of entries that grows as ∛n copied
// per derivation, counting the layers merged now and then). The result is a new catalogue, with a new Version
// and no memoised analyses (see KeepAnalysesFrom). old is read, never modified: other sessions
// may be using it. The slices of data that are not old's become the new catalogue's own: nothing
// else may append to them in place (slices the Appended methods and copies return are nobody
// else's).
//
// The entries kept point where old's did: into the data of the catalogue the chain was first
// built from (NewCatalogue) or into the Added slices of the deltas since, not into data. That is
// safe: no element within the length of a catalogue's data or a delta's slice is modified once
// built (appending in place writes past every length in use), and an object kept in an index is
// one no delta since took out, so data holds it, copied by value, with equal content. It keeps
// those arrays alive while the chain of catalogues lives: the first data and the objects added
// since, which the Manager's next whole read replaces; not a copy of the data per patch, as
// pointing into data would.
func DeriveCatalogue(old *Catalogue, data CatalogueData, delta *CatalogueDelta) *Catalogue {
	c := &Catalogue{data: data, version: catalogueVersions.Add(1), misses: make(map[string]bool)}
	c.funcs, c.byOID, c.byFirstArg = old.funcs, old.byOID, old.byFirstArg
	c.views, c.rels, c.unlogged, c.readPolicies, c.writeRuns = old.views, old.rels, old.unlogged, old.readPolicies, old.writeRuns
	c.writeRunsByOID = old.writeRunsByOID
	c.types, c.rowTypes, c.domainBase, c.domainChecks = old.types, old.rowTypes, old.domainBase, old.domainChecks
	c.operators, c.fieldCastTargets, c.castsTo = old.operators, old.fieldCastTargets, old.castsTo
	c.rowFunctions, c.schemas = old.rowFunctions, old.schemas
	c.rooms = [dataParts]*room{
		roomFor(old.rooms[functionsData], old.data.Functions, data.Functions), roomFor(old.rooms[viewsData], old.data.Views, data.Views),
		roomFor(old.rooms[relationsData], old.data.Relations, data.Relations), roomFor(old.rooms[typesData], old.data.Types, data.Types),
		roomFor(old.rooms[fieldCastsData], old.data.FieldCasts, data.FieldCasts),
	}
	c.deriveFunctions(delta)
	c.deriveRelations(delta)
	rowTypesChanged := c.deriveTypes(old, delta)
	c.deriveFieldCasts(delta)
	c.deriveRowFunctions(delta, rowTypesChanged)
	c.deriveSchemas(delta)
	return c
}

// dataParts counts the parts of CatalogueData that patching appends to.
const dataParts = 5

// The parts of CatalogueData that patching appends to, indexing Catalogue.rooms.
const (
	functionsData = iota
	viewsData
	relationsData
	typesData
	fieldCastsData
)

// room is the room past the end of one part's slice of a catalogue's data: the elements of its
// array past its length, which no catalogue reads. The first derivation to take it appends there
// in place; any other copies, so that no two catalogues write the same elements.
type room struct{ taken atomic.Bool }

// roomFor returns the room past the end of derived, a part's slice of a catalogue derived from
// one whose slice was old with room oldRoom: oldRoom when the slice is shared, else a room of the
// new catalogue's own (appended in place into oldRoom, taken then, or a copy).
func roomFor[T any](oldRoom *room, old, derived []T) *room {
	if len(old) == len(derived) && unsafe.SliceData(old) == unsafe.SliceData(derived) {
		return oldRoom
	}
	return &room{}
}

// appendToData returns list with more appended: in place when list's array has room for them and
// r is not taken yet (taking it), else in a new array with room for an eighth more (at least 16):
// a migration adding objects one by one copies the part once every so many additions.
func appendToData[T any](r *room, list, more []T) []T {
	if len(more) <= cap(list)-len(list) && r.taken.CompareAndSwap(false, true) {
		return append(list, more...)
	}
	n := len(list) + len(more)
	return append(append(make([]T, 0, n+max(16, n/8)), list...), more...)
}

// AppendedFunctions returns c's functions with more after them, for the data of a catalogue
// derived from c: written in place past the end of c's slice when the room there is free (a
// migration adds objects one after another, each derivation appending to the last one's data,
// so adding costs what is added), else copied. c's data is never modified.
func (c *Catalogue) AppendedFunctions(more []Function) []Function {
	return appendToData(c.rooms[functionsData], c.data.Functions, more)
}

// AppendedViews returns c's views with more after them (see AppendedFunctions).
func (c *Catalogue) AppendedViews(more []View) []View {
	return appendToData(c.rooms[viewsData], c.data.Views, more)
}

// AppendedRelations returns c's relations with more after them (see AppendedFunctions).
func (c *Catalogue) AppendedRelations(more []Relation) []Relation {
	return appendToData(c.rooms[relationsData], c.data.Relations, more)
}

// AppendedTypes returns c's types with more after them (see AppendedFunctions).
func (c *Catalogue) AppendedTypes(more []Type) []Type {
	return appendToData(c.rooms[typesData], c.data.Types, more)
}

// AppendedFieldCasts returns c's composite fields with more after them (see AppendedFunctions).
func (c *Catalogue) AppendedFieldCasts(more []FieldCast) []FieldCast {
	return appendToData(c.rooms[fieldCastsData], c.data.FieldCasts, more)
}

// deriveFunctions updates funcs and byOID (old's until then) with delta's functions.
func (c *Catalogue) deriveFunctions(delta *CatalogueDelta) {
	if len(delta.RemovedFunctions)+len(delta.AddedFunctions) == 0 {
		return
	}
	c.funcs.own()
	c.byOID.own()
	var byFirstArg owning
	for i := range delta.RemovedFunctions {
		f := &delta.RemovedFunctions[i]
		key := qualified{f.Schema, f.Name}
		if list, found := withoutFunction(c.funcs.at(key), f.OID); found && len(list) == 0 {
			c.funcs.remove(key)
		} else if found {
			c.funcs.set(key, list)
		}
		c.byOID.remove(f.OID)
		if firstArgIndexed(f) {
			if list, found := withoutFunction(c.byFirstArg.at(f.ArgTypes[0]), f.OID); found {
				byFirstArg.own(&c.byFirstArg)
				if len(list) == 0 {
					c.byFirstArg.remove(f.ArgTypes[0])
				} else {
					c.byFirstArg.set(f.ArgTypes[0], list)
				}
			}
		}
	}
	for i := range delta.AddedFunctions {
		f := &delta.AddedFunctions[i]
		key := qualified{f.Schema, f.Name}
		c.funcs.set(key, withFunction(c.funcs.at(key), f))
		c.byOID.set(f.OID, f)
		if firstArgIndexed(f) {
			byFirstArg.own(&c.byFirstArg)
			c.byFirstArg.set(f.ArgTypes[0], withFunction(c.byFirstArg.at(f.ArgTypes[0]), f))
		}
	}
	c.funcs.settle()
	c.byOID.settle()
	byFirstArg.settle(&c.byFirstArg)
}

// deriveRelations updates views, rels, unlogged and readPolicies (old's until then) with delta's
// views and relations.
func (c *Catalogue) deriveRelations(delta *CatalogueDelta) {
	if len(delta.RemovedViews)+len(delta.AddedViews) > 0 {
		c.views.own()
		for i := range delta.RemovedViews {
			c.views.remove(qualified{delta.RemovedViews[i].Schema, delta.RemovedViews[i].Name})
		}
		for i := range delta.AddedViews {
			v := &delta.AddedViews[i]
			c.views.set(qualified{v.Schema, v.Name}, v)
		}
		c.views.settle()
	}
	if len(delta.RemovedRelations)+len(delta.AddedRelations) == 0 {
		return
	}
	c.rels.own()
	var unlogged, readPolicies, writeRuns, writeRunsByOID owning
	for i := range delta.RemovedRelations {
		r := &delta.RemovedRelations[i]
		key := qualified{r.Schema, r.Name}
		c.rels.remove(key)
		if _, held := c.unlogged.get(key); held {
			unlogged.own(&c.unlogged)
			c.unlogged.remove(key)
		}
		if _, held := c.readPolicies.get(key); held {
			readPolicies.own(&c.readPolicies)
			c.readPolicies.remove(key)
		}
		if _, held := c.writeRuns.get(key); held {
			writeRuns.own(&c.writeRuns)
			c.writeRuns.remove(key)
		}
		if _, held := c.writeRunsByOID.get(r.OID); held {
			writeRunsByOID.own(&c.writeRunsByOID)
			c.writeRunsByOID.remove(r.OID)
		}
	}
	for i := range delta.AddedRelations {
		r := &delta.AddedRelations[i]
		key := qualified{r.Schema, r.Name}
		c.rels.set(key, r.Kind)
		if r.Unlogged {
			unlogged.own(&c.unlogged)
			c.unlogged.set(key, true)
		}
		if r.ReadPolicy != "" {
			readPolicies.own(&c.readPolicies)
			c.readPolicies.set(key, r)
		}
		if r.writes() {
			writeRuns.own(&c.writeRuns)
			c.writeRuns.set(key, r)
			writeRunsByOID.own(&c.writeRunsByOID)
			c.writeRunsByOID.set(r.OID, r)
		}
	}
	c.rels.settle()
	unlogged.settle(&c.unlogged)
	readPolicies.settle(&c.readPolicies)
	writeRuns.settle(&c.writeRuns)
	writeRunsByOID.settle(&c.writeRunsByOID)
}

// deriveTypes updates types, rowTypes, domainBase and domainChecks (old's until then) with
// delta's types, and returns the OIDs that are a row type in one of old and c but not the other.
func (c *Catalogue) deriveTypes(old *Catalogue, delta *CatalogueDelta) []uint32 {
	if len(delta.RemovedTypes)+len(delta.AddedTypes) == 0 {
		return nil
	}
	// Each index is owned (its changed entries copied) only when the delta changes it: a new
	// composite type leaves the domains' as they are.
	c.types.own()
	var rowTypes, domainBase, domainChecks owning
	for i := range delta.RemovedTypes {
		t := &delta.RemovedTypes[i]
		c.types.remove(qualified{t.Schema, t.Name})
		if _, held := c.rowTypes.get(t.OID); held {
			rowTypes.own(&c.rowTypes)
			c.rowTypes.remove(t.OID)
		}
		if _, held := c.domainBase.get(t.OID); held {
			domainBase.own(&c.domainBase)
			c.domainBase.remove(t.OID)
		}
		if _, held := c.domainChecks.get(t.OID); held {
			domainChecks.own(&c.domainChecks)
			c.domainChecks.remove(t.OID)
		}
	}
	for i := range delta.AddedTypes {
		t := &delta.AddedTypes[i]
		c.types.set(qualified{t.Schema, t.Name}, t)
		switch t.Kind {
		case 'c':
			rowTypes.own(&c.rowTypes)
			c.rowTypes.set(t.OID, true)
		case 'd':
			domainBase.own(&c.domainBase)
			c.domainBase.set(t.OID, t.Base)
			if t.Check != "" {
				domainChecks.own(&c.domainChecks)
				c.domainChecks.set(t.OID, t)
			}
		}
	}
	c.types.settle()
	rowTypes.settle(&c.rowTypes)
	domainBase.settle(&c.domainBase)
	domainChecks.settle(&c.domainChecks)
	var changed []uint32
	note := func(oid uint32) {
		if old.rowTypes.at(oid) != c.rowTypes.at(oid) && !slices.Contains(changed, oid) {
			changed = append(changed, oid)
		}
	}
	for i := range delta.RemovedTypes {
		note(delta.RemovedTypes[i].OID)
	}
	for i := range delta.AddedTypes {
		note(delta.AddedTypes[i].OID)
	}
	return changed
}

// deriveFieldCasts updates fieldCastTargets (old's until then) with delta's field casts: the
// lists of the composites they name are made again from data, whose field casts are few (only
// composites with a field of a type that a cast outside pg_catalog converts to).
func (c *Catalogue) deriveFieldCasts(delta *CatalogueDelta) {
	if len(delta.RemovedFieldCasts)+len(delta.AddedFieldCasts) == 0 {
		return
	}
	affected := make(map[uint32][]uint32)
	for _, fc := range delta.RemovedFieldCasts {
		affected[fc.Composite] = nil
	}
	for _, fc := range delta.AddedFieldCasts {
		affected[fc.Composite] = nil
	}
	for _, fc := range c.data.FieldCasts {
		if targets, ok := affected[fc.Composite]; ok {
			affected[fc.Composite] = append(targets, fc.Target)
		}
	}
	c.fieldCastTargets.own()
	for composite, targets := range affected {
		if len(targets) == 0 {
			c.fieldCastTargets.remove(composite)
		} else {
			c.fieldCastTargets.set(composite, targets)
		}
	}
	c.fieldCastTargets.settle()
}

// deriveRowFunctions updates rowFunctions (old's until then) for delta's functions and for the
// functions whose first argument is one of rowTypesChanged (found by looking at every function's
// first argument type, which only a change of a composite type costs).
func (c *Catalogue) deriveRowFunctions(delta *CatalogueDelta, rowTypesChanged []uint32) {
	if len(delta.RemovedFunctions)+len(delta.AddedFunctions)+len(rowTypesChanged) == 0 {
		return
	}
	var rowFunctions owning
	set := func(oid uint32, name string, f *Function) { // f nil: oid is not callable so
		list, found := withoutFunction(c.rowFunctions.at(name), oid)
		if !found && f == nil {
			return
		}
		rowFunctions.own(&c.rowFunctions)
		if f != nil {
			list = withFunction(list, f)
		}
		if len(list) == 0 {
			c.rowFunctions.remove(name)
		} else {
			c.rowFunctions.set(name, list)
		}
	}
	for i := range delta.RemovedFunctions {
		set(delta.RemovedFunctions[i].OID, delta.RemovedFunctions[i].Name, nil)
	}
	for i := range delta.AddedFunctions {
		if f := &delta.AddedFunctions[i]; c.rowFunction(f) {
			set(f.OID, f.Name, f)
		}
	}
	// The functions whose first argument is of a row type that appeared or went: found in
	// byFirstArg (which points where funcs and byOID do, not into data; see DeriveCatalogue), not
	// by walking every function, which a database of 20000 would pay for each table, view or type
	// made. A type of initdb's, which byFirstArg leaves out, has them looked for in every function.
	update := func(f *Function) {
		if c.rowFunction(f) {
			set(f.OID, f.Name, f)
		} else {
			set(f.OID, f.Name, nil)
		}
	}
	for _, rowType := range rowTypesChanged {
		if rowType >= firstUserOID {
			for _, f := range c.byFirstArg.at(rowType) {
				update(f)
			}
			continue
		}
		for i := range c.data.Functions {
			f := &c.data.Functions[i]
			if len(f.ArgTypes) == 0 || f.ArgTypes[0] != rowType {
				continue
			}
			// Point where funcs and byOID do, not into data (see DeriveCatalogue).
			indexed := c.byOID.at(f.OID)
			if indexed == nil { // data and funcs disagree: not when data is as documented
				indexed = f
			}
			update(indexed)
		}
	}
	rowFunctions.settle(&c.rowFunctions)
}

// withFunction returns list, ordered by OID, with f in it (in place of one of the same OID); list
// is not modified.
func withFunction(list []*Function, f *Function) []*Function {
	at := 0
	for at < len(list) && list[at].OID < f.OID {
		at++
	}
	out := make([]*Function, 0, len(list)+1)
	out = append(append(out, list[:at]...), f)
	if at < len(list) && list[at].OID == f.OID {
		at++
	}
	return append(out, list[at:]...)
}

// withoutFunction returns list without the function with OID oid, and whether it held it; list is
// not modified.
func withoutFunction(list []*Function, oid uint32) ([]*Function, bool) {
	at := slices.IndexFunc(list, func(f *Function) bool { return f.OID == oid })
	if at < 0 {
		return list, false
	}
	out := make([]*Function, 0, len(list)-1)
	return append(append(out, list[:at]...), list[at+1:]...), true
}

// maxKeptAnalyses bounds the memoised analyses KeepAnalysesFrom carries; maxKeptLayers bounds
// the layers they are carried in (the sizes KeepAnalysesFrom keeps them at make it far fewer).
const (
	maxKeptAnalyses = 100_000
	maxKeptLayers   = 24
)

// keptLayer is analyses memoised in an older catalogue, carried into this one: each holds here
// unless one of the names its result rests on changed after step since of the chain (see
// holdsSince). A layer's map is never modified once the catalogue is in use.
type keptLayer struct {
	analyses map[memoKey]any // fnResult, boxed as in memo: carried without copying the result
	since    uint64
}

// holdsSince reports whether an analysis carried from step since of c's chain still holds in c:
// no name its result rests on changed after it.
func (c *Catalogue) holdsSince(value any, since uint64) bool {
	result := value.(fnResult)
	if result.dependsOnTooMany {
		return false
	}
	for _, name := range result.dependsOn {
		if step, changed := c.changedAt.get(name); changed && step > since {
			return false
		}
	}
	return true
}

// KeepAnalysesFrom carries into c the analyses memoised in old that cannot depend on what changed
// between them, and returns how many it carries (at most: one that a later change made stale is
// skipped when looked up). c must be old with only the objects named changedNames read again, and
// not in use yet; an analysis holds when none of the names its result rests on (every call
// resolved by name, found or not, every function whose effect it took, every relation read and
// type cast to by name, found or not) is one of them. A migration that creates functions one by
// one, each calling the last, then analyses each new function alone instead of the whole chain.
//
// Functions may have changed in any way. Relations and types may only have been added under names
// old held no relation, view or type of, outside pg_catalog: those are found by name alone (names
// qualified with pg_catalog are not recorded). A change that alters or drops a relation or type,
// adds an unlogged or row-secured relation or a domain (whose effects reach statements that do not
// name them) or anything to pg_catalog, or changes everything keeps nothing: do not call it then.
//
// A migration calls this after every change, so it costs what old analysed, not what all the
// catalogues before it did. The catalogues it links form a chain of steps; c is one step past
// old, and changedAt records, for each name changed along the chain, the step of its last change
// (a layered index: a step copies a bounded part of it). old's own analyses become a new layer,
// stamped with old's step; old's layers are carried as they are. An analysis of a layer holds
// while no name it rests on changed after the layer's step, which a lookup checks. Layers are
// merged, newest into the next, while the newer is at least half the size of the next (what
// still holds is copied): their sizes grow toward the oldest, so an analysis is copied a few
// times in all, a lookup checks a few layers, and a change costs what it adds. The layers are
// plain maps: storing each analysis into the concurrent memo would cost ten times more.
func (c *Catalogue) KeepAnalysesFrom(old *Catalogue, changedNames []string) int {
	c.keptStep = old.keptStep + 1
	c.changedAt = old.changedAt
	c.changedAt.own()
	for _, name := range changedNames {
		c.changedAt.set(name, c.keptStep)
	}
	c.changedAt.settle()
	newest := keptLayer{analyses: make(map[memoKey]any), since: old.keptStep}
	old.memo.Range(func(key, value any) bool {
		newest.analyses[key.(memoKey)] = value
		return len(newest.analyses) < maxKeptAnalyses
	})
	layers := make([]keptLayer, 0, len(old.kept)+1)
	if len(newest.analyses) > 0 {
		layers = append(layers, newest)
	}
	layers = append(layers, old.kept...)
	carried := 0
	for _, layer := range layers {
		carried += len(layer.analyses)
	}
	for len(layers) >= 2 && (2*len(layers[0].analyses) >= len(layers[1].analyses) || len(layers) > maxKeptLayers || carried > maxKeptAnalyses) {
		merged := c.mergeLayers(layers[0], layers[1])
		carried -= len(layers[0].analyses) + len(layers[1].analyses) - len(merged.analyses)
		layers = append([]keptLayer{merged}, layers[2:]...)
	}
	c.kept = layers
	return carried
}

// mergeLayers returns one layer of what still holds in c of newer and older, newer's analysis of
// a key winning: stamped with c's step, since every analysis in it holds at that step.
func (c *Catalogue) mergeLayers(newer, older keptLayer) keptLayer {
	merged := keptLayer{analyses: make(map[memoKey]any, len(newer.analyses)+len(older.analyses)), since: c.keptStep}
	for _, layer := range [2]keptLayer{newer, older} {
		for key, value := range layer.analyses {
			if len(merged.analyses) >= maxKeptAnalyses {
				return merged
			}
			if _, found := merged.analyses[key]; !found && c.holdsSince(value, layer.since) {
				merged.analyses[key] = value
			}
		}
	}
	return merged
}

// memoised returns the memoised analysis of key, if any: one made with this catalogue, else the
// newest carried one that still holds.
func (c *Catalogue) memoised(key memoKey) (fnResult, bool) {
	if cached, ok := c.memo.Load(key); ok {
		return cached.(fnResult), true
	}
	for i := range c.kept {
		if kept, ok := c.kept[i].analyses[key]; ok && c.holdsSince(kept, c.kept[i].since) {
			return kept.(fnResult), true
		}
	}
	return fnResult{}, false
}

// indexFunctions indexes the functions by name and OID.
func (c *Catalogue) indexFunctions() {
	funcs := make(map[qualified][]*Function, len(c.data.Functions))
	byOID := make(map[uint32]*Function, len(c.data.Functions))
	// Most names have one function: their lists share one array (capped, so that appending an
	// overload copies) instead of one allocation each.
	one := make([]*Function, len(c.data.Functions))
	for i := range c.data.Functions {
		f := &c.data.Functions[i]
		key := qualified{f.Schema, f.Name}
		if list, ok := funcs[key]; ok {
			funcs[key] = append(list[:len(list):len(list)], f)
		} else {
			one[i] = f
			funcs[key] = one[i : i+1 : i+1]
		}
		byOID[f.OID] = f
	}
	byFirstArg := make(map[uint32][]*Function)
	for i := range c.data.Functions {
		if f := &c.data.Functions[i]; firstArgIndexed(f) {
			byFirstArg[f.ArgTypes[0]] = append(byFirstArg[f.ArgTypes[0]], f)
		}
	}
	for _, list := range byFirstArg {
		slices.SortFunc(list, func(a, b *Function) int { return cmp.Compare(a.OID, b.OID) })
	}
	c.funcs, c.byOID, c.byFirstArg = newLayered(funcs), newLayered(byOID), newLayered(byFirstArg)
}

// indexRelations indexes views and relations by name.
func (c *Catalogue) indexRelations() {
	views := make(map[qualified]*View, len(c.data.Views))
	for i := range c.data.Views {
		v := &c.data.Views[i]
		views[qualified{v.Schema, v.Name}] = v
	}
	rels := make(map[qualified]byte, len(c.data.Relations))
	unlogged := make(map[qualified]bool)
	readPolicies := make(map[qualified]*Relation)
	writeRuns := make(map[qualified]*Relation)
	writeRunsByOID := make(map[uint32]*Relation)
	for i := range c.data.Relations {
		r := &c.data.Relations[i]
		rels[qualified{r.Schema, r.Name}] = r.Kind
		if r.Unlogged {
			unlogged[qualified{r.Schema, r.Name}] = true
		}
		if r.ReadPolicy != "" {
			readPolicies[qualified{r.Schema, r.Name}] = r
		}
		if r.writes() {
			writeRuns[qualified{r.Schema, r.Name}] = r
			writeRunsByOID[r.OID] = r
		}
	}
	c.views, c.rels, c.unlogged, c.readPolicies = newLayered(views), newLayered(rels), newLayered(unlogged), newLayered(readPolicies)
	c.writeRuns, c.writeRunsByOID = newLayered(writeRuns), newLayered(writeRunsByOID)
}

// indexTypes indexes types by name, row types, and domains with their bases and checks.
func (c *Catalogue) indexTypes() {
	types := make(map[qualified]*Type, len(c.data.Types))
	rowTypes := make(map[uint32]bool)
	domainBase := make(map[uint32]uint32)
	domainChecks := make(map[uint32]*Type)
	for i := range c.data.Types {
		t := &c.data.Types[i]
		types[qualified{t.Schema, t.Name}] = t
		switch t.Kind {
		case 'c':
			rowTypes[t.OID] = true
		case 'd':
			domainBase[t.OID] = t.Base
			if t.Check != "" {
				domainChecks[t.OID] = t
			}
		}
	}
	c.types, c.rowTypes, c.domainBase, c.domainChecks = newLayered(types), newLayered(rowTypes), newLayered(domainBase), newLayered(domainChecks)
}

// indexOperatorsAndCasts indexes operators by name, casts by target and composite fields by type.
func (c *Catalogue) indexOperatorsAndCasts() {
	c.operators = make(map[qualified][]*Operator, len(c.data.Operators))
	for i := range c.data.Operators {
		o := &c.data.Operators[i]
		key := qualified{o.Schema, o.Name}
		c.operators[key] = append(c.operators[key], o)
	}
	fieldCastTargets := make(map[uint32][]uint32, len(c.data.FieldCasts))
	for _, fc := range c.data.FieldCasts {
		fieldCastTargets[fc.Composite] = append(fieldCastTargets[fc.Composite], fc.Target)
	}
	c.fieldCastTargets = newLayered(fieldCastTargets)
	c.castsTo = make(map[uint32][]Cast, len(c.data.Casts))
	for _, cast := range c.data.Casts {
		c.castsTo[cast.Target] = append(c.castsTo[cast.Target], cast)
	}
}

// indexRowFunctions lists the functions attribute notation may call.
func (c *Catalogue) indexRowFunctions() {
	rowFunctions := make(map[string][]*Function)
	for i := range c.data.Functions {
		if f := &c.data.Functions[i]; c.rowFunction(f) {
			rowFunctions[f.Name] = append(rowFunctions[f.Name], f)
		}
	}
	c.rowFunctions = newLayered(rowFunctions)
}

// rowFunction reports whether attribute notation may call f: it takes one argument of a row type
// (or of a polymorphic or record type).
func (c *Catalogue) rowFunction(f *Function) bool {
	return f.Kind == 'f' && len(f.ArgTypes) > 0 && argCountFits(f, 1) &&
		(c.rowTypes.at(f.ArgTypes[0]) || f.ArgTypes[0] == oidRecord || polymorphic(f.ArgTypes[0]))
}

// Version identifies this catalogue; a reload that finds different data gets a new one.
func (c *Catalogue) Version() uint64 { return c.version }

// Database is the database the catalogue describes.
func (c *Catalogue) Database() string { return c.data.Database }

// LoadedAt is when the catalogue's data was read.
func (c *Catalogue) LoadedAt() time.Time { return c.data.LoadedAt }

// Warnings are the problems met while loading.
func (c *Catalogue) Warnings() []string { return c.data.Warnings }

// FunctionCount is the number of functions outside pg_catalog.
func (c *Catalogue) FunctionCount() int { return len(c.data.Functions) }

// Data returns the data the catalogue was built from; callers must not modify it, nor append to
// its slices in place (a derivation may be using the room past their ends: see AppendedFunctions).
func (c *Catalogue) Data() *CatalogueData { return &c.data }

// Function returns the function with the given OID.
func (c *Catalogue) Function(oid uint32) (*Function, bool) {
	return c.byOID.get(oid)
}

// DefaultSearchPath returns the search_path a session of role starts with, before startup parameters.
func (c *Catalogue) DefaultSearchPath(role string) []string {
	if path, ok := c.data.DefaultSearchPath[role]; ok {
		return path
	}
	if path, ok := c.data.DefaultSearchPath[""]; ok {
		return path
	}
	return []string{"$user", "public"}
}

// SameContent reports whether other was built from the same functions, views, relations and types,
// so that a reload that changed nothing can keep the old catalogue and its analyses.
func (c *Catalogue) SameContent(other *Catalogue) bool {
	return other != nil && c.Checksum() == other.Checksum()
}

// Checksum is a digest of the catalogue's content.
func (c *Catalogue) Checksum() string {
	c.checksumOnce.Do(func() { c.checksum = checksum(&c.data) })
	return c.checksum
}

// noteMiss records that name is not in the catalogue although the catalogue was looked at again.
func (c *Catalogue) noteMiss(name string) {
	c.missMu.Lock()
	defer c.missMu.Unlock()
	if len(c.misses) < 4096 {
		c.misses[name] = true
	}
}

// missed reports whether name was recorded as missing.
func (c *Catalogue) missed(name string) bool {
	c.missMu.Lock()
	defer c.missMu.Unlock()
	return c.misses[name]
}

// checksum digests the data in a fixed order with FNV-1a (a change detector, not a security measure).
func checksum(d *CatalogueData) string {
	h := uint64(14695981039346656037)
	write := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h ^= 0xff
		h *= 1099511628211
	}
	funcs := make([]*Function, len(d.Functions))
	for i := range d.Functions {
		funcs[i] = &d.Functions[i]
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].OID < funcs[j].OID })
	for _, f := range funcs {
		write(strconv.FormatUint(uint64(f.OID), 10))
		write(f.Schema)
		write(f.Name)
		write(f.Language)
		write(string([]byte{f.Volatility, f.Kind}))
		write(strconv.FormatBool(f.ReturnsSet))
		write(f.Source)
		write(f.SQLBody)
		for _, t := range f.ArgTypes {
			write(strconv.FormatUint(uint64(t), 10))
		}
		write(strconv.Itoa(f.Defaults))
		write(f.DefaultExprs)
		write(strconv.FormatBool(f.Variadic))
		write(f.Arguments)
		write(f.Result)
		write(strings.Join(f.Config, "\x00"))
		write(f.Comment)
		write(f.Override)
		write(f.DefinerUser)
		for _, o := range f.Calls {
			write(strconv.FormatUint(uint64(o), 10))
		}
	}
	views := append([]View(nil), d.Views...)
	sort.Slice(views, func(i, j int) bool { return views[i].OID < views[j].OID })
	for _, v := range views {
		write(v.Schema)
		write(v.Name)
		write(v.Definition)
	}
	rels := append([]Relation(nil), d.Relations...)
	sort.Slice(rels, func(i, j int) bool {
		if rels[i].Schema != rels[j].Schema {
			return rels[i].Schema < rels[j].Schema
		}
		return rels[i].Name < rels[j].Name
	})
	for _, r := range rels {
		write(r.Schema)
		write(r.Name)
		write(string([]byte{r.Kind}) + strconv.FormatBool(r.Unlogged))
		write(r.ReadPolicy)
		write(r.WriteRuns + strconv.FormatBool(r.WriteRule))
		for _, o := range r.Reaches {
			write(strconv.FormatUint(uint64(o), 10))
		}
	}
	types := append([]Type(nil), d.Types...)
	sort.Slice(types, func(i, j int) bool { return types[i].OID < types[j].OID })
	for _, t := range types {
		write(strconv.FormatUint(uint64(t.OID), 10))
		write(t.Schema)
		write(t.Name)
		write(string([]byte{t.Kind}) + strconv.FormatUint(uint64(t.Base), 10))
		write(t.Check)
	}
	operators := append([]Operator(nil), d.Operators...)
	sort.Slice(operators, func(i, j int) bool {
		if operators[i].Function != operators[j].Function {
			return operators[i].Function < operators[j].Function
		}
		return operators[i].Schema+"\x00"+operators[i].Name < operators[j].Schema+"\x00"+operators[j].Name
	})
	for _, o := range operators {
		write(o.Schema)
		write(o.Name)
		write(strconv.FormatUint(uint64(o.Function), 10))
		write(o.BuiltinFunction)
		write(strconv.FormatUint(uint64(o.Negator), 10) + "/" + strconv.FormatUint(uint64(o.Commutator), 10))
	}
	casts := append([]Cast(nil), d.Casts...)
	sort.Slice(casts, func(i, j int) bool {
		if casts[i].Source != casts[j].Source {
			return casts[i].Source < casts[j].Source
		}
		return casts[i].Target < casts[j].Target
	})
	for _, c := range casts {
		write(strconv.FormatUint(uint64(c.Source), 10) + ">" + strconv.FormatUint(uint64(c.Target), 10) + ":" +
			strconv.FormatUint(uint64(c.Function), 10))
	}
	fieldCasts := append([]FieldCast(nil), d.FieldCasts...)
	sort.Slice(fieldCasts, func(i, j int) bool {
		if fieldCasts[i].Composite != fieldCasts[j].Composite {
			return fieldCasts[i].Composite < fieldCasts[j].Composite
		}
		return fieldCasts[i].Target < fieldCasts[j].Target
	})
	for _, fc := range fieldCasts {
		write(strconv.FormatUint(uint64(fc.Composite), 10) + "." + strconv.FormatUint(uint64(fc.Target), 10))
	}
	roles := make([]string, 0, len(d.DefaultSearchPath))
	for role := range d.DefaultSearchPath {
		roles = append(roles, role)
	}
	sort.Strings(roles)
	for _, role := range roles {
		write(role)
		write(strings.Join(d.DefaultSearchPath[role], "\x00"))
	}
	write(strings.Join(d.LoginDefaults, "\x00"))
	write(strings.Join(d.Schemas, "\x00"))
	return strconv.FormatUint(h, 16)
}

// CatalogueSource gives the classifier each database's catalogue. It must be safe for concurrent use.
type CatalogueSource interface {
	// Catalogue returns the database's current catalogue, or nil when none is available. On first use
	// of a database, and after a change it was told of, it may block briefly (bounded by its own
	// timeout) while the catalogue loads; it must never do I/O when a current catalogue is held.
	Catalogue(database string) *Catalogue
	// Held returns the catalogue held for the database without waiting, and whether it is current:
	// no change it was told of is still to be read. A statement whose verdict does not depend on
	// the catalogue is classified without waiting when it is not.
	Held(database string) (held *Catalogue, current bool)
	// Lookup is called when a statement names a function or relation that current does not hold
	// (name is the object's own name, without its schema). It
	// may read the database again (bounded). looked reports whether the database was looked at
	// again (false when failing or too slow: the verdict is then not cached, so that a later
	// statement tries again); newer is the catalogue to use from now on, or nil when nothing changed.
	Lookup(database string, current *Catalogue, name string) (newer *Catalogue, looked bool)
	// Changed says that objects of the database changed (committed: the change is committed or
	// rolled back, so reading them now is worth it) or are about to (a statement that changes them
	// is passing through): the next Catalogue call must not return a catalogue that misses a change
	// committed before Changed was called. changes names what changed.
	Changed(database string, changes *CatalogueChanges, committed bool)
}

// firstUserOID is PostgreSQL's FirstNormalObjectId: the objects initdb makes have lower OIDs.
const firstUserOID = 16384

// firstArgIndexed reports whether byFirstArg lists f: its first argument is of a type made after
// initdb.
func firstArgIndexed(f *Function) bool {
	return len(f.ArgTypes) > 0 && f.ArgTypes[0] >= firstUserOID
}
