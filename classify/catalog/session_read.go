package catalog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/wire"
)

// maxSessionReadNames bounds the names a SessionRead reads; a larger change is read by the Manager.
const maxSessionReadNames = 16

// SessionRead reads the objects a change names over the connection of the session that made the
// change, sent right behind it in the same write: the node runs it as soon as the change is done,
// without another process to wake and another round trip to wait for. The session passes the
// replies to Receive (they are not the client's) and the result to Manager.ChangedAndRead.
//
// It is a batch of extended-protocol messages ended by Sync, in an implicit transaction of its own:
// it sets, for that transaction only, client_encoding to UTF8, search_path to pg_catalog (then
// pg_temp, so that nothing of the session's temporary schema shadows a catalogue table), generic
// plans and a time limit (see sessionSettings), and reads the same parts, with the same queries, as the Manager's own read by
// name (refreshNames), each prepared once per connection under a name of its own. It must be sent
// only where the session's change ends its own transaction (autocommit) on the primary.
//
// Its state: built (Query), receiving (Receive per reply frame, in order), done (the
// ReadyForQuery came); failed when an ErrorResponse came, a reply did not decode, or it read an
// object of a temporary schema (whose text would differ from the Manager's read). A failed read is
// not used: ChangedAndRead then does what Changed does.
type SessionRead struct {
	database string
	// generation is the database's when the read was prepared: a change told, or a lookup asked
	// for, after it may have committed after the read's snapshot, so the read is then not used.
	generation uint64
	changes    classify.CatalogueChanges
	wanted     namedReads
	// statements are the read's statements, the settings first.
	statements []sessionStatement
	// collectors receive the rows of each statement after the first (the settings), in order.
	collectors []func(row pgx.CollectableRow) error
	statement  int // the statement whose replies arrive: 0 is the settings
	fields     []pgconn.FieldDescription
	typeMap    *pgtype.Map
	fresh      classify.CatalogueData
	done       bool
	err        error
}

// PrepareSessionRead returns the read of what changes names, to be sent on the session's own
// connection right behind the statement that makes them, or nil when that cannot serve: no
// catalogue is held yet, the change is not named in full or names too much, it makes a schema
// (the list of schemas is the Manager's read's, see refreshNames), or configured
// assertions must be resolved again (the Manager's own read does that).
func (m *Manager) PrepareSessionRead(database string, changes *classify.CatalogueChanges) *SessionRead {
	if changes == nil || changes.Empty() || changes.Everything || len(changes.Schemas) > 0 ||
		len(changes.Functions)+len(changes.Relations)+len(changes.Types) > maxSessionReadNames ||
		len(m.opts.Overrides.Readonly)+len(m.opts.Overrides.Writes) > 0 {
		return nil
	}
	db := m.state(database)
	old := db.cat.Load()
	if old == nil {
		return nil
	}
	r := &SessionRead{database: database, typeMap: pgtype.NewMap()}
	r.changes.Merge(changes)
	db.mu.Lock()
	r.generation = db.generation
	ok := db.confirmWith(&r.changes, maxSessionReadNames)
	db.mu.Unlock()
	if !ok {
		return nil
	}
	r.wanted = namedReadsFor(old.Data(), &r.changes)
	settingsName, settings := sessionSettings(sessionReadLimit * m.opts.Wait)
	r.statements = append(r.statements, sessionStatement{name: settingsName, query: settings})
	queue := func(names []string, key, query, nameColumn string, collect func(row pgx.CollectableRow) error) {
		if len(names) > 0 {
			r.statements = append(r.statements, sessionStatement{name: sessionStatementPrefix + key,
				query: fmt.Sprintf(query, nameColumn+" = ANY($1::text[])"), names: names})
			r.collectors = append(r.collectors, collect)
		}
	}
	queue(r.wanted.functions, "functions", functionsPart.query, functionsPart.nameColumn, collectInto(functionsPart, &r.fresh.Functions))
	if len(r.wanted.relations) > 0 {
		// From here on (the reads that lock views), wait on a lock briefly: see sessionGiveWay.
		giveWayName, giveWay := sessionGiveWay(sessionReadLimit * m.opts.Wait)
		r.statements = append(r.statements, sessionStatement{name: giveWayName, query: giveWay})
		r.collectors = append(r.collectors, func(pgx.CollectableRow) error { return nil })
	}
	queue(r.wanted.relations, "views", viewsPart.query, viewsPart.nameColumn, collectInto(viewsPart, &r.fresh.Views))
	queue(r.wanted.relations, "relations", relationsPart.query, relationsPart.nameColumn, collectInto(relationsPart, &r.fresh.Relations))
	queue(r.wanted.types, "types", typesPart.query, typesPart.nameColumn, collectInto(typesPart, &r.fresh.Types))
	queue(r.wanted.fieldCasts, "field_casts", fieldCastsPart.query, fieldCastsPart.nameColumn, collectInto(fieldCastsPart, &r.fresh.FieldCasts))
	return r
}

// sessionStatementPrefix starts the names of the statements a SessionRead prepares on a session's
// connection; the proxy's names for client statements never start so.
const sessionStatementPrefix = "pgowl.catalogue."

// sessionSettings returns the read's first statement and its name on a connection: for its
// transaction only, UTF8 text whatever the session's client_encoding, names qualified as the
// Manager's own read prints them (pg_temp after pg_catalog, so nothing temporary shadows a
// catalogue table), plans made once per connection (the reads are index lookups by name;
// planning them every time costs more than running them) and never compiled (withoutJIT), and a
// bound on the read, limit, as both lock_timeout and statement_timeout. The bound frees the
// session when the read is held on a lock (another transaction's on a view it reads, or an
// explicit LOCK of a catalogue table): the read fails, the statement behind it runs, and the
// change is read by the Manager as after any failed read (at most Options.Wait more). The name
// carries the limit, so that a connection's statement prepared under another one is not taken for
// it.
func sessionSettings(limit time.Duration) (name, query string) {
	ms := strconv.FormatInt(max(limit.Milliseconds(), 1), 10)
	return sessionStatementPrefix + "settings." + ms + "ms",
		"SELECT pg_catalog.set_config('client_encoding', 'UTF8', true), " +
			"pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), " +
			"pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true), " +
			"pg_catalog.set_config('jit', 'off', true), " +
			"pg_catalog.set_config('lock_timeout', '" + ms + "', true), " +
			"pg_catalog.set_config('statement_timeout', '" + ms + "', true)"
}

// sessionGiveWay returns a statement of a SessionRead, and its name on a connection, that lowers
// the read's lock_timeout, for the rest of its transaction, to half the session's
// deadlock_timeout, at most maxLockWait (or limit, when shorter), as the Manager's (giveWayToDDL).
// It runs before the reads of views: pg_get_viewdef locks each view it prints, and the
// relations that view reads, until the transaction ends, so that the read and another session's
// DDL over the same views (DROP SCHEMA ... CASCADE) can each hold a view the other waits for.
// PostgreSQL then fails whichever waited deadlock_timeout (1 s by default) first; with the
// shorter wait the read gives up first, fails, and the change is read by the Manager (which gives
// way too, giveWayToDDL). The reads before it keep the read's whole limit: a lock held on a
// catalogue table there (TestSessionCatalogueReadHeldOnALockDoesNotHoldTheSession) is no DDL
// over views.
func sessionGiveWay(limit time.Duration) (name, query string) {
	bound := min(limit, maxLockWait)
	return sessionStatementPrefix + "give_way." + strconv.FormatInt(max(bound.Milliseconds(), 1), 10) + "ms",
		"SELECT pg_catalog.set_config('lock_timeout', " + lockWaitBelowDeadlockTimeout(bound) + ", true)"
}

// sessionReadLimit is how long a session's read may run, as a multiple of Options.Wait: longer
// than the wait a client's cancel gives a read ahead of its statement (the proxy's
// cancelWaitsForCatalogueRead, 2 s) with the default Wait, so that the cancel, not this bound,
// decides there.
const sessionReadLimit = 2

// sessionStatement is one statement of a SessionRead: its name on the connection, its text, and
// the names it reads (its one parameter; none for the settings).
type sessionStatement struct {
	name, query string
	names       []string
}

// Messages returns the read as extended-protocol messages, up to and including Sync: each
// statement prepared under its own name unless prepared holds the name (a Close first, in case
// a statement of that name is left from a read that failed), then bound, described and run. It
// adds the names it prepares to prepared (the connection's prepared statements, see
// StatementNames). Its statements are parsed after the settings ran, so they are planned with
// them. The session's unnamed statement is not touched; the unnamed portal is used, which the
// Sync before the read ended anyway.
func (r *SessionRead) Messages(prepared map[string]struct{}) []byte {
	var out []byte
	for _, st := range r.statements {
		if _, ok := prepared[st.name]; !ok {
			out = wire.AppendFrame(out, wire.MsgClose, append(append([]byte{wire.TargetStatement}, st.name...), 0))
			body := append(append([]byte(st.name), 0), st.query...)
			body = append(body, 0)
			if st.names != nil {
				body = append(body, 0, 1)
				body = binary.BigEndian.AppendUint32(body, pgtype.TextArrayOID)
			} else {
				body = append(body, 0, 0)
			}
			out = wire.AppendFrame(out, wire.MsgParse, body)
			prepared[st.name] = struct{}{}
		}
		// Bind the unnamed portal to the statement: no parameter formats (text), the
		// parameters, no result formats (text).
		body := append(append([]byte{0}, st.name...), 0, 0, 0)
		if st.names != nil {
			value := textArrayValue(st.names)
			body = append(body, 0, 1)
			body = binary.BigEndian.AppendUint32(body, uint32(len(value)))
			body = append(body, value...)
		} else {
			body = append(body, 0, 0)
		}
		body = append(body, 0, 0)
		out = wire.AppendFrame(out, wire.MsgBind, body)
		out = wire.AppendFrame(out, wire.MsgDescribe, []byte{wire.TargetPortal, 0})
		out = wire.AppendFrame(out, wire.MsgExecute, []byte{0, 0, 0, 0, 0})
	}
	return wire.AppendFrame(out, wire.MsgSync, nil)
}

// StatementNames are the names Messages may prepare on a connection; after a failed read the
// session forgets them, so that the next read prepares them again.
func (r *SessionRead) StatementNames() []string {
	names := make([]string, len(r.statements))
	for i, st := range r.statements {
		names[i] = st.name
	}
	return names
}

// textArrayValue renders names as a text[] value in PostgreSQL's array syntax, every element
// quoted (array input reads the same whatever the session's settings).
func textArrayValue(names []string) []byte {
	out := []byte{'{'}
	for i, name := range names {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		for j := 0; j < len(name); j++ {
			if name[j] == '"' || name[j] == '\\' {
				out = append(out, '\\')
			}
			out = append(out, name[j])
		}
		out = append(out, '"')
	}
	return append(out, '}')
}

// collectInto returns a collector that scans a row as p's and appends it to list.
func collectInto[T any](p part[T], list *[]T) func(row pgx.CollectableRow) error {
	return func(row pgx.CollectableRow) error {
		var v T
		if err := p.scan(row, &v); err != nil {
			return err
		}
		*list = append(*list, v)
		return nil
	}
}

// Receive takes one reply frame of the read; it reports done at its ReadyForQuery.
func (r *SessionRead) Receive(typ byte, body []byte) (done bool) {
	switch typ {
	case wire.MsgRowDescription:
		var desc pgproto3.RowDescription
		if err := desc.Decode(body); err != nil {
			r.fail(err)
			return false
		}
		r.fields = r.fields[:0]
		for _, f := range desc.Fields {
			r.fields = append(r.fields, pgconn.FieldDescription{Name: string(f.Name), DataTypeOID: f.DataTypeOID,
				DataTypeSize: f.DataTypeSize, TypeModifier: f.TypeModifier, Format: f.Format})
		}
	case wire.MsgDataRow:
		if r.statement == 0 || r.err != nil {
			return false // the settings' row, or a read that failed already
		}
		var row pgproto3.DataRow
		if err := row.Decode(body); err != nil {
			r.fail(err)
			return false
		}
		if r.statement > len(r.collectors) {
			r.fail(errors.New("more results than statements"))
			return false
		}
		if err := r.collectors[r.statement-1](&textRow{typeMap: r.typeMap, fields: r.fields, values: row.Values}); err != nil {
			r.fail(err)
		}
	case wire.MsgCommandComplete:
		r.statement++
	case wire.MsgErrorResponse:
		var e pgproto3.ErrorResponse
		if err := e.Decode(body); err != nil {
			r.fail(err)
		} else {
			r.fail(&pgconn.PgError{Severity: e.Severity, Code: e.Code, Message: e.Message})
		}
	case wire.MsgReadyForQuery:
		r.done = true
		if r.err == nil && r.statement != len(r.collectors)+1 {
			r.fail(fmt.Errorf("%d results for %d statements", r.statement, len(r.collectors)+1))
		}
		return true
	}
	return false
}

// Fail marks the read as failed (the session lost the connection before the read was done).
func (r *SessionRead) Fail(err error) { r.fail(err) }

func (r *SessionRead) fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("catalog: read on the session's connection: %w", err)
	}
}

// Err is why the read cannot be used, or nil.
func (r *SessionRead) Err() error {
	if r.err == nil && !r.done {
		return errors.New("catalog: read on the session's connection: not done")
	}
	return r.err
}

// usable reports whether the read's result may patch the catalogue: it is complete, and holds no
// object of a temporary schema (printed unqualified here, qualified by the Manager's own read).
func (r *SessionRead) usable() bool {
	if r.Err() != nil {
		return false
	}
	temporary := func(schema string) bool {
		return strings.HasPrefix(schema, "pg_temp_") || strings.HasPrefix(schema, "pg_toast_temp_")
	}
	for i := range r.fresh.Functions {
		if temporary(r.fresh.Functions[i].Schema) {
			return false
		}
	}
	for i := range r.fresh.Views {
		if temporary(r.fresh.Views[i].Schema) {
			return false
		}
	}
	return true
}

// textRow is a DataRow of the read, scanned as pgx scans rows (text format).
type textRow struct {
	typeMap *pgtype.Map
	fields  []pgconn.FieldDescription
	values  [][]byte
}

func (t *textRow) FieldDescriptions() []pgconn.FieldDescription { return t.fields }
func (t *textRow) Scan(dest ...any) error                       { return pgx.ScanRow(t.typeMap, t.fields, t.values, dest...) }
func (t *textRow) RawValues() [][]byte                          { return t.values }
func (t *textRow) Values() ([]any, error) {
	return nil, errors.New("catalog: a session read's rows are scanned, not converted")
}

// ChangedAndRead is Changed for a committed change whose objects were read (a SessionRead, nil
// for none) after the change was committed: when the read is usable and covers every change still
// pending, no read runs, and no change was told and no lookup asked for since it was prepared, the
// held catalogue is patched with it (applied reports true). The patch runs in the caller, before
// it returns: it holds the database's read slot (db.loading) until the patched catalogue is
// stored, so a statement of another session whose verdict depends on the catalogue waits for it
// (Catalogue, Lookup). It costs a fraction of a millisecond, and the session's next statement,
// already waiting on the client's connection, would wait for it anyway: handing it to a goroutine
// of its own cost more in scheduling and wake-ups (on a busy machine, more than the patch) than
// parsing the next statement meanwhile saved. Otherwise it does what Changed(committed) does: the change is read before
// the next statement that depends on the catalogue is classified.
func (m *Manager) ChangedAndRead(name string, changes *classify.CatalogueChanges, read *SessionRead) (applied bool) {
	if read == nil || !read.usable() {
		if read != nil && read.err != nil {
			m.opts.Logger.Info().Err(read.err).Str("database", name).
				Msg("a session's read of its catalogue change failed; the change is read by the catalogue's own connection")
		}
		m.Changed(name, changes, true)
		return false
	}
	return m.patchOwnChange(name, changes, func(db *database, old *classify.Catalogue) (ownPatch, bool) {
		if db.generation != read.generation || !db.pending.Within(&read.changes) || !changes.Within(&read.changes) {
			return ownPatch{}, false
		}
		for i := range read.fresh.Functions {
			read.fresh.Functions[i].Override = db.assertions[read.fresh.Functions[i].OID]
		}
		db.confirmed(&read.changes, false)
		return ownPatch{fresh: &read.fresh, wanted: read.wanted, covers: &read.changes}, true
	}, false)
}

// ChangedAndCreated tells the Manager that a session's statement, now committed, made the object
// created describes (classify.CreatedObject, from the statement's parse tree: a function, a type
// or a view), and nothing else; ctx is the session's classification context, whose search_path
// and user say where an unqualified name went. When the held catalogue can tell the object's rows
// (classify.Catalogue.TakeCreated), no change is pending, no read runs and the object takes no
// name an unconfirmed view uses, the catalogue is patched with it at once, without a read
// (applied reports true): the change costs what the node took to make it. Otherwise it does what
// Changed(committed) does. A new object gets OIDs of pgowl's (derivedOID), and a view its query
// as written; the next read of any name (which reads such objects too, see confirmWith) or of the
// whole catalogue (the periodic one at the latest) replaces them with what PostgreSQL made: the
// classifier uses an OID only to tell objects apart and to key its analyses, while operators,
// casts and aggregates that name an object by OID are read, with what they name, when they are
// made.
func (m *Manager) ChangedAndCreated(name string, changes *classify.CatalogueChanges, created classify.CreatedObject, ctx *classify.Context) (applied bool) {
	return m.changedAndCreated(name, changes, created, ctx, nil, nil)
}

// Generation is database name's generation now: a session takes it as it sends a statement whose
// object the catalogue is to take from the statement, and passes it to ChangedAndCreatedSince or
// TakePreparedSince.
func (m *Manager) Generation(name string) uint64 {
	db := m.state(name)
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.generation
}

// ChangedAndCreatedSince is ChangedAndCreated for a statement sent at generation since
// (Generation): when any change was told, or lookup asked for, after it, that change may have
// committed after the statement (another session's CREATE OR REPLACE of the same object), and
// the object is read instead of taken from the statement, as a SessionRead of that generation
// would not be used: the older definition must not be stored over the newer.
func (m *Manager) ChangedAndCreatedSince(name string, changes *classify.CatalogueChanges, created classify.CreatedObject, ctx *classify.Context, since uint64) (applied bool) {
	return m.changedAndCreated(name, changes, created, ctx, nil, &since)
}

// TakePreparedSince is TakePrepared for a statement sent at generation since, as
// ChangedAndCreatedSince.
func (m *Manager) TakePreparedSince(name string, changes *classify.CatalogueChanges, prepared *PreparedTake, since uint64) (applied bool) {
	return m.changedAndCreated(name, changes, prepared.created, &prepared.ctx, prepared, &since)
}

// TakePrepared is ChangedAndCreated for the object prepared describes (PrepareTake), with the
// catalogue prepared derived while the statement ran stored as it is when the held catalogue is
// still the one it was derived from: the change then costs the session a few map writes.
// Otherwise it does what ChangedAndCreated does.
func (m *Manager) TakePrepared(name string, changes *classify.CatalogueChanges, prepared *PreparedTake) (applied bool) {
	return m.changedAndCreated(name, changes, prepared.created, &prepared.ctx, prepared, nil)
}

func (m *Manager) changedAndCreated(name string, changes *classify.CatalogueChanges, created classify.CreatedObject, ctx *classify.Context, prepared *PreparedTake, since *uint64) (applied bool) {
	if created == nil || changes == nil || changes.Empty() || !changes.Within(ptr(created.Changes())) ||
		len(m.opts.Overrides.Readonly)+len(m.opts.Overrides.Writes) > 0 {
		m.Changed(name, changes, true)
		return false
	}
	return m.patchOwnChange(name, changes, func(db *database, old *classify.Catalogue) (ownPatch, bool) {
		if since != nil && db.generation != *since {
			// Told or looked up after the statement was sent: that may be a later change of
			// the same object, which the statement's own must not undo. It is read.
			return ownPatch{}, false
		}
		if !db.pending.Within(changes) || db.usedByUnconfirmedView(created) {
			// Another change is pending (the statement's own was told when it was
			// classified), or an unconfirmed view uses the name: it is read.
			return ownPatch{}, false
		}
		var own ownPatch
		if prepared != nil && prepared.old == old {
			own = ownPatch{fresh: prepared.fresh, wanted: prepared.wanted, covers: &prepared.covers, derived: prepared.derived}
		} else {
			fresh, ok := old.TakeCreated(created, ctx, m.derivedOID)
			if !ok {
				return ownPatch{}, false
			}
			covers := created.Changes()
			own = ownPatch{fresh: fresh, wanted: namedReadsFor(old.Data(), &covers), covers: &covers}
		}
		db.takenUnread(created)
		m.confirmLater(db)
		return own, true
	}, true)
}

// PreparedTake is the catalogue of a database with an object a statement makes taken in
// (classify.Catalogue.TakeCreated), derived from the catalogue held while the node runs the
// statement, before it is known to succeed: TakePrepared stores it once the statement has
// committed, when the held catalogue is still the one it was derived from. Nothing is stored
// before: a statement that fails, or a catalogue that changed meanwhile, leaves it unused.
type PreparedTake struct {
	created classify.CreatedObject
	ctx     classify.Context
	// old is the catalogue it was derived from; derived is old with fresh taken in.
	old, derived *classify.Catalogue
	fresh        *classify.CatalogueData
	wanted       namedReads
	covers       classify.CatalogueChanges
}

// Catalogue is the catalogue with the object taken in, for analyses the statements that use the
// object will want (classify.Classifier.PrepareUses) before it is stored.
func (p *PreparedTake) Catalogue() *classify.Catalogue { return p.derived }

// Created is the object the statement makes.
func (p *PreparedTake) Created() classify.CreatedObject { return p.created }

// Taken is the rows of the object taken in (the functions, types, views and relations it makes).
func (p *PreparedTake) Taken() *classify.CatalogueData { return p.fresh }

// PrepareTake derives, from the held catalogue of database name, the catalogue with the object
// created describes taken in, as ChangedAndCreated would once the statement that makes it has
// committed; ctx is the session's context then. It returns nil when ChangedAndCreated would not
// take the object from its statement by what the held catalogue says (nothing is held, it cannot
// tell the object's rows, overrides are configured). A session calls it while the node runs the
// statement, when it would otherwise wait, and hands the result to TakePrepared.
func (m *Manager) PrepareTake(name string, created classify.CreatedObject, ctx *classify.Context) *PreparedTake {
	if created == nil || ctx == nil || len(m.opts.Overrides.Readonly)+len(m.opts.Overrides.Writes) > 0 {
		return nil
	}
	old := m.state(name).cat.Load()
	if old == nil {
		return nil
	}
	fresh, ok := old.TakeCreated(created, ctx, m.derivedOID)
	if !ok {
		return nil
	}
	p := &PreparedTake{created: created, ctx: *ctx, old: old, fresh: fresh, covers: created.Changes()}
	p.wanted = namedReadsFor(old.Data(), &p.covers)
	p.derived = derivePatched(old, fresh, p.wanted, true)
	return p
}

func ptr[T any](v T) *T { return &v }

// patchTaken returns the data of oldCatalogue with the objects taken from a statement (fresh)
// added, each in place of the held object of its OID if any (OR REPLACE), and what that changed.
// Unlike patch, which replaces every object of a name read again, it takes nothing else out: a
// statement makes its object in one schema, and the objects of the same name in other schemas
// stay as they are. New objects have OIDs above all held (derivedOID), so a take appends to each
// part, without a look through it.
func patchTaken(oldCatalogue *classify.Catalogue, fresh *classify.CatalogueData) (*classify.CatalogueData, *classify.CatalogueDelta) {
	old := oldCatalogue.Data()
	data := *old
	data.LoadedAt = time.Now()
	delta := &classify.CatalogueDelta{}
	parts := &delta.Parts
	var views, relations bool
	data.Functions, delta.RemovedFunctions, delta.AddedFunctions, parts.Functions = replaceByOID(old.Functions, fresh.Functions,
		func(f *classify.Function) uint32 { return f.OID }, oldCatalogue.AppendedFunctions)
	data.Views, delta.RemovedViews, delta.AddedViews, views = replaceByOID(old.Views, fresh.Views,
		func(v *classify.View) uint32 { return v.OID }, oldCatalogue.AppendedViews)
	data.Relations, delta.RemovedRelations, delta.AddedRelations, relations = replaceByOID(old.Relations, fresh.Relations,
		func(r *classify.Relation) uint32 { return r.OID }, oldCatalogue.AppendedRelations)
	parts.Relations = views || relations
	data.Types, delta.RemovedTypes, delta.AddedTypes, parts.Types = replaceByOID(old.Types, fresh.Types,
		func(t *classify.Type) uint32 { return t.OID }, oldCatalogue.AppendedTypes)
	return &data, delta
}

// replaceByOID is replace for objects that take the place of the held objects of their OIDs
// only: the held ones are found by a binary search of list (sorted by OID), so that adding
// objects past all held costs what is added.
func replaceByOID[T any](list, fresh []T, oid func(*T) uint32, appended func([]T) []T) (out, removed, added []T, changed bool) {
	if len(fresh) == 0 {
		return list, nil, nil, false
	}
	var held []uint32
	for i := range fresh {
		want := oid(&fresh[i])
		if len(list) == 0 || want > oid(&list[len(list)-1]) {
			continue // past all held: the common case of a new object
		}
		if at := sort.Search(len(list), func(j int) bool { return oid(&list[j]) >= want }); at < len(list) && oid(&list[at]) == want {
			held = append(held, want)
		}
	}
	var drop func(*T) bool
	if len(held) > 0 {
		drop = func(v *T) bool { return slices.Contains(held, oid(v)) }
	}
	return replace(list, fresh, drop, func(a, b *T) int { return cmp.Compare(oid(a), oid(b)) }, appended)
}

// derivedOID returns an OID for a function the Manager adds without reading it: from the top of
// the OID space, which PostgreSQL reaches only after billions of objects; CreatedFunction passes
// over one a held object has.
func (m *Manager) derivedOID() uint32 {
	return derivedOIDFloor + m.derivedOIDs.Add(1)%(1<<24)
}

// readsDerivedOIDs reports whether a read found a function under an OID derivedOID may have
// given: an analysis memoised for the function added without a read would be taken for it.
func readsDerivedOIDs(fresh *classify.CatalogueData) bool {
	for i := range fresh.Views {
		if fresh.Views[i].OID >= derivedOIDFloor {
			return true
		}
	}
	for i := range fresh.Types {
		if fresh.Types[i].OID >= derivedOIDFloor {
			return true
		}
	}
	for i := range fresh.Functions {
		if fresh.Functions[i].OID >= derivedOIDFloor {
			return true
		}
	}
	return false
}

// derivedOIDFloor is where the OIDs of functions added without a read start (see derivedOID).
const derivedOIDFloor = 0xFF000000

// patchOwnChange patches the held catalogue of database name with a change a session made and
// committed, when take, called under the database's lock with the held catalogue, returns what
// to patch it with (fresh, the names it replaces, the change it covers); else, or when a read
// runs or no catalogue is held, it does what Changed(committed) does. The patch runs in the
// caller, before it returns: it holds the database's read slot (db.loading) until the patched
// catalogue is stored, so a statement of another session whose verdict depends on the catalogue
// waits for it (Catalogue, Lookup).
func (m *Manager) patchOwnChange(name string, changes *classify.CatalogueChanges,
	take func(db *database, old *classify.Catalogue) (ownPatch, bool), fromStatement bool) bool {
	started := time.Now()
	db := m.state(name)
	db.mu.Lock()
	db.told.note(changes)
	for db.loading != nil && (db.patching || db.confirming) {
		// The session's previous change is still being patched in (a change right behind a
		// change): that takes well under a millisecond, a read of the Manager's own far longer.
		// A read of the objects taken before (confirmTaken) takes a few milliseconds: the
		// change is taken once it is in, over whatever it read of the change's names.
		done := db.loading
		db.mu.Unlock()
		<-done
		db.mu.Lock()
	}
	old := db.cat.Load()
	var own ownPatch
	ok := db.loading == nil && old != nil
	if ok {
		own, ok = take(db, old)
	}
	if !ok {
		db.mu.Unlock()
		m.Changed(name, changes, true)
		return false
	}
	// The change is committed and known: once patched, the catalogue reflects every generation
	// so far. Until then the change is pending and the read slot taken.
	done := make(chan struct{})
	db.loading, db.patching = done, true
	db.generation++
	generation := db.generation
	db.changed = generation
	db.pending = classify.CatalogueChanges{}
	db.dirty.Store(true)
	db.mu.Unlock()
	m.applyOwnChange(db, old, &own, fromStatement, generation, done, started)
	return true
}

// ownPatch is what a session's change patches the held catalogue with: the rows read or taken
// (fresh) for the names wanted, the change they cover, and the catalogue already derived with
// them (PrepareTake), nil when it is yet to be derived.
type ownPatch struct {
	fresh   *classify.CatalogueData
	wanted  namedReads
	covers  *classify.CatalogueChanges
	derived *classify.Catalogue
}

// derivePatched returns old patched with fresh for wanted (read by a session, or taken from its
// statement: fromStatement), with the analyses that hold over the patch kept; old itself when the
// patch changes nothing.
func derivePatched(old *classify.Catalogue, fresh *classify.CatalogueData, wanted namedReads, fromStatement bool) *classify.Catalogue {
	var data *classify.CatalogueData
	var delta *classify.CatalogueDelta
	if fromStatement {
		data, delta = patchTaken(old, fresh)
	} else {
		data, delta = patch(old, fresh, wanted)
	}
	if !delta.Changed() {
		return old
	}
	cat := classify.DeriveCatalogue(old, *data, delta)
	if keepsAnalyses(old.Data(), fresh, wanted, delta) && (fromStatement || !readsDerivedOIDs(fresh)) {
		cat.KeepAnalysesFrom(old, wanted.names())
	}
	return cat
}

// applyOwnChange patches old with fresh for wanted (read by the session, or taken from its
// statement: fromStatement), stores the result as reflecting generation,
// and frees the read slot (done); changes told meanwhile are then read by the Manager.
func (m *Manager) applyOwnChange(db *database, old *classify.Catalogue, own *ownPatch, fromStatement bool, generation uint64, done chan struct{}, started time.Time) {
	cat := own.derived
	if cat == nil {
		cat = derivePatched(old, own.fresh, own.wanted, fromStatement)
	}
	covers := own.covers
	db.mu.Lock()
	if cat != old {
		db.cat.Store(cat)
	}
	db.applied = generation
	next := false
	if db.applied >= db.changed {
		db.dirty.Store(false)
	} else if db.readWhenDone && !db.pending.Empty() {
		// Committed changes told while the patch ran: read them now rather than when a
		// statement asks.
		next = true
	}
	if db.pollFound && !db.pending.Empty() {
		next = true // what a poll of the change markers found meanwhile
	}
	db.loading, db.patching, db.readWhenDone = nil, false, false
	if next {
		m.startLoad(db)
	}
	db.mu.Unlock()
	close(done)
	m.opts.Logger.Debug().Str("database", db.name).Int("function_count", cat.FunctionCount()).Uint64("version", cat.Version()).
		Bool("session", true).Strs("functions", covers.Functions).Strs("relations", covers.Relations).
		Strs("types", covers.Types).Bool("from_statement", fromStatement).Bool("prepared", own.derived != nil).Dur("took", time.Since(started)).Msg("function catalogue read")
}
