package catalog

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
)

// Changes made past pgowl, found by the catalogue's own change markers.
//
// A change a session makes through pgowl is told to the Manager (Changed and the calls that take
// it in). A change made on the primary itself, or through another pgowl, is not: until a read
// finds it, reads are planned with the old definition, and a standby that already replayed the
// change runs the new one (a function replaced by one that writes then fails there with 25006).
// The periodic whole read (Options.RefreshInterval) found it at the latest; with
// Options.ChangePollInterval the Manager asks the primary, that often, which catalogue rows were
// written since it last asked, and reads those names.
//
// Every row PostgreSQL writes carries the transaction that wrote it (xmin), and a new or replaced
// function, view, type, policy or relation is a new row of pg_proc, pg_rewrite, pg_type,
// pg_policy or pg_class. Each poll selects the rows whose xmin is at or past the xmin of the
// previous poll's snapshot (pg_current_snapshot(): every transaction older than it had ended), and
// keeps what it selected; what the previous poll selected is left out. A row written since the
// previous poll is either by a transaction past that snapshot's xmin or by a subtransaction of
// one (savepoints, PL/pgSQL exception blocks; their IDs are higher than their parent's, and the
// snapshot's list of running transactions does not hold them), so nothing committed since is
// missed. A transaction left open elsewhere holds that xmin back: the polls then select every
// row written since it began, and find none of them again. (A row is found twice only when a
// poll's xmin passes it again after 2^32 transactions, which reads its name once more.) A
// snapshot xmin that goes back (another primary after a failover, which may have used IDs
// below it) reads the whole catalogue.
//
// Each poll scans those catalogues whole (no index covers xmin): 7-10 ms on PostgreSQL 15 for a
// database of 20000 functions and 2000 tables on the 2-core development machine, 1.2-2 ms for
// 300 functions and 30 tables (round trip included; throwaway tests, 2026-12-05). It runs over a connection of its own, so no read and no
// session's patch waits for it. A database no statement has used for a minute is not polled (and
// its connection is closed); the first use after that polls at once, from the snapshot it kept,
// so what changed meanwhile is found all the same. Temporary objects and TOAST are left out, as
// the reads leave them out.
//
// The names found are read as a read by name (a rule, a cast, an operator, a role's or database's
// search_path default, or fewer functions than the last poll counted: the whole catalogue), in
// the background: statements do not wait for it, as they do for a change a session made. What
// the read finds changed reaches Options.Found like any other read's. Names a session told the
// Manager of in the last two polls are left out: the session's own change is in already, and
// reading it again would cost a migration a read per poll. A change past pgowl to such a name
// within that window is found by the next whole read. A dropped function leaves no row; the
// count of functions falling says one went (another overload, or a namesake later on the
// search_path, may now take its calls). So do operators, casts and the defaults of roles and
// databases (ALTER ROLE ... RESET search_path deletes a row): a count of them that falls reads
// the whole catalogue. So do views and domains: one dropped past pgowl may have hidden a namesake
// later on the search_path (a view that calls a writing function, a domain whose CHECK does),
// which its name now means. Tables and other types are not counted: jobs and functions drop
// staging tables and partitions often (a function's own are not told, see classify's
// relationOnly), each fall would read the catalogue whole, and a table seldom hides a view. A
// drop and a creation within one interval keep the count, as does a drop of a function (a view,
// a domain) past pgowl while a session of this pgowl changes functions (relations or types: its
// own drops lower the count too, and are read by name); those, and a dropped table, are found by
// the next whole read. The snapshot starts with each whole read (the first poll
// runs on the read's connection before its first part, so nothing committed between the two is
// missed).
//
// A poll first reads the primary's current snapshot (pg_current_snapshot(): the oldest
// transaction still running, one past the latest to have ended, and the transactions still running
// below that) and the time its server started. When both read as they did in the last scan, the
// scan is left out: every catalogue row is written by a transaction with an ID, and the end of one
// either moves the snapshot's upper bound (an ID at or past it) or takes it out of those still
// running (an ID below it), so nothing can have been committed since that scan, which saw all that was
// committed before. A database nobody changes then costs its primary one small statement per poll
// (0.1 ms), not the scan (about 2 ms on an empty PostgreSQL 15 database, see above). A read-only
// transaction has no ID and changes nothing; any transaction with one that ends anywhere in the
// cluster brings the scan back at the next poll. The server's start time keeps another server
// answering at the same address (a failover) from ever reading as the last scan did.

// changeMarkers is what the next poll starts from: the previous poll's snapshot xmin (as the
// 32-bit ID xmin holds), the rows it selected, and how many functions it counted. known is false
// until a whole read has polled.
type changeMarkers struct {
	known    bool
	xmin     uint32
	selected map[markedRow]struct{}
	// counts are the rows of pg_proc (less temporary functions), pg_operator, pg_cast,
	// pg_db_role_setting, the comments on functions (pg_description, whose pgowl:readonly and
	// pgowl:writes directives count), the constraints of domains (pg_constraint), pg_inherits,
	// pg_namespace, the views (pg_class) and the domains (pg_type), by the letter
	// changeMarkersQuery names them with.
	counts map[byte]int64
	// schemasHeld are schemas that existed at the scan that made these markers: the
	// catalogue's as held before a poll's scan, every schema as a first poll selected them; nil
	// when not known. schemasSelected are the names of the schema rows the scan selected, which
	// existed then under those names too. See madeSchemasOnly.
	schemasHeld, schemasSelected []string
	// snapshot is currentSnapshot as the scan that made these markers read it: while the
	// primary's reads the same, no transaction has ended since that scan (see above).
	snapshot string
}

// markerCounts is how many counts changeMarkersQuery returns (its 'n' rows).
const markerCounts = 11

// markedRow identifies a catalogue row a poll selected: its catalogue (the part letter of
// changeMarkersQuery), its OID, and the transaction that wrote it.
type markedRow struct {
	part byte
	oid  uint32
	xmin uint32
}

// changeMarkersQuery selects the rows written by transactions at or past $1 (a snapshot's xmin;
// NULL: its own snapshot's): part, name, OID and xmin. Parts: 'f' functions, 'r' relations
// (pg_class), 'v' views (their _RETURN rule), 'p' policies (their table), 'w' what writing a
// table runs (its triggers, column defaults and CHECK constraints: Relation.WriteRuns; a foreign
// key, under the table it references: Relation.Reaches; one dropped
// leaves the relation's entry on the safe side until the next whole read), 't' types, '*' what only
// a whole read reads (other rules, operators, casts, search_path defaults, domain constraints,
// inheritance and partitions); a comment on a function written since is its function's 'f' row.
// A schema made, renamed, dropped or granted (pg_namespace, temporary ones left out) is 'm', with
// its name: schemas only made (madeSchemasOnly) change the list of schemas alone, where an
// unqualified CREATE goes (classify.CatalogueChanges.Schemas); any other row is a change of
// everything (the path a name resolves along, every name in a renamed schema).
// A first poll (no since) also selects every schema's name (part 'M'): the schemas as of its own
// snapshot, which the next poll compares with (madeSchemasOnly).
// Its last rows are its own snapshot's xmin (part 's', in name), the snapshot itself with the
// server's start time (part 'S', currentSnapshot, in name) and its counts (part 'n', in oid)
// of functions (name 'f'), operators ('o'), casts ('k'), search_path and other defaults of roles
// and databases ('d'), comments on functions ('c'), domain constraints ('y'), pg_inherits ('i'),
// schemas ('m'), views ('v') and domains ('D'), and a hash of the names of the roles that own SECURITY DEFINER functions
// ('u', compared for any change: a rename of such a role reads the whole catalogue): a row deleted (a comment removed, a constraint dropped, a partition detached) leaves no
// xmin to select, and a count that falls says one was. age() measures back from the next transaction ID, across wraparound: a row committed
// since the last poll is between 0 and the age of that poll's xmin; a row older than 2^31
// transactions (frozen rows keep their raw xmin) comes out negative and is left out.
const changeMarkersQuery = `WITH s AS (
  SELECT coalesce($1::text::xid, ((pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())::text::bigint % 4294967296)::text)::xid) AS since),
ns AS (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname LIKE 'pg\_temp\_%' OR nspname LIKE 'pg\_toast%')
SELECT 'f', p.proname::text, p.oid::bigint, p.xmin::text::bigint FROM pg_catalog.pg_proc p, s
 WHERE pg_catalog.age(p.xmin) BETWEEN 0 AND pg_catalog.age(s.since) AND p.pronamespace NOT IN (SELECT oid FROM ns)
UNION ALL
SELECT 'r', c.relname::text, c.oid::bigint, c.xmin::text::bigint FROM pg_catalog.pg_class c, s
 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') AND c.relpersistence <> 't' AND pg_catalog.age(c.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT CASE WHEN w.rulename = '_RETURN' THEN 'v' ELSE '*' END, c.relname::text, w.oid::bigint, w.xmin::text::bigint
  FROM pg_catalog.pg_rewrite w JOIN pg_catalog.pg_class c ON c.oid = w.ev_class, s
 WHERE c.relpersistence <> 't' AND pg_catalog.age(w.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT 'p', c.relname::text, y.oid::bigint, y.xmin::text::bigint FROM pg_catalog.pg_policy y JOIN pg_catalog.pg_class c ON c.oid = y.polrelid, s
 WHERE pg_catalog.age(y.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT 'w', c.relname::text, g.oid::bigint, g.xmin::text::bigint FROM pg_catalog.pg_trigger g JOIN pg_catalog.pg_class c ON c.oid = g.tgrelid, s
 WHERE NOT g.tgisinternal AND c.relpersistence <> 't' AND pg_catalog.age(g.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT 'w', c.relname::text, d.oid::bigint, d.xmin::text::bigint FROM pg_catalog.pg_attrdef d JOIN pg_catalog.pg_class c ON c.oid = d.adrelid, s
 WHERE c.relpersistence <> 't' AND pg_catalog.age(d.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT 'w', c.relname::text, k.oid::bigint, k.xmin::text::bigint FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid, s
 WHERE k.contype = 'c' AND c.relpersistence <> 't' AND pg_catalog.age(k.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT 'w', c.relname::text, k.oid::bigint, k.xmin::text::bigint FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.confrelid, s
 WHERE k.contype = 'f' AND c.relpersistence <> 't' AND pg_catalog.age(k.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT 't', t.typname::text, t.oid::bigint, t.xmin::text::bigint FROM pg_catalog.pg_type t, s
 WHERE pg_catalog.age(t.xmin) BETWEEN 0 AND pg_catalog.age(s.since) AND t.typnamespace NOT IN (SELECT oid FROM ns)
UNION ALL
SELECT 'f', p.proname::text, e.objoid::bigint, e.xmin::text::bigint
  FROM pg_catalog.pg_description e JOIN pg_catalog.pg_proc p ON p.oid = e.objoid, s
 WHERE e.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND pg_catalog.age(e.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT '*', '', y.oid::bigint, y.xmin::text::bigint FROM pg_catalog.pg_constraint y, s WHERE y.contypid <> 0 AND pg_catalog.age(y.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT '*', '', i.inhrelid::bigint, i.xmin::text::bigint FROM pg_catalog.pg_inherits i, s WHERE pg_catalog.age(i.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT '*', '', o.oid::bigint, o.xmin::text::bigint FROM pg_catalog.pg_operator o, s WHERE pg_catalog.age(o.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT '*', '', k.oid::bigint, k.xmin::text::bigint FROM pg_catalog.pg_cast k, s WHERE pg_catalog.age(k.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT '*', '', 0, d.xmin::text::bigint FROM pg_catalog.pg_db_role_setting d, s WHERE pg_catalog.age(d.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT 'm', n.nspname::text, n.oid::bigint, n.xmin::text::bigint FROM pg_catalog.pg_namespace n, s
 WHERE n.oid NOT IN (SELECT oid FROM ns) AND pg_catalog.age(n.xmin) BETWEEN 0 AND pg_catalog.age(s.since)
UNION ALL
SELECT 'M', n.nspname::text, n.oid::bigint, 0 FROM pg_catalog.pg_namespace n WHERE $1::text IS NULL AND n.oid NOT IN (SELECT oid FROM ns)
UNION ALL
SELECT 's', (pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())::text::bigint % 4294967296)::text, 0, 0
UNION ALL
SELECT 'S', ` + currentSnapshot + `, 0, 0
UNION ALL
SELECT 'n', 'f', count(*), 0 FROM pg_catalog.pg_proc WHERE pronamespace NOT IN (SELECT oid FROM ns)
UNION ALL
SELECT 'n', 'o', count(*), 0 FROM pg_catalog.pg_operator
UNION ALL
SELECT 'n', 'k', count(*), 0 FROM pg_catalog.pg_cast
UNION ALL
SELECT 'n', 'd', count(*), 0 FROM pg_catalog.pg_db_role_setting
UNION ALL
SELECT 'n', 'c', count(*), 0 FROM pg_catalog.pg_description WHERE classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass
UNION ALL
SELECT 'n', 'y', count(*), 0 FROM pg_catalog.pg_constraint WHERE contypid <> 0
UNION ALL
SELECT 'n', 'i', count(*), 0 FROM pg_catalog.pg_inherits
UNION ALL
SELECT 'n', 'm', count(*), 0 FROM pg_catalog.pg_namespace WHERE oid NOT IN (SELECT oid FROM ns)
UNION ALL
SELECT 'n', 'v', count(*), 0 FROM pg_catalog.pg_class WHERE relkind = 'v' AND relpersistence <> 't'
UNION ALL
SELECT 'n', 'D', count(*), 0 FROM pg_catalog.pg_type WHERE typtype = 'd' AND typnamespace NOT IN (SELECT oid FROM ns)
UNION ALL
SELECT 'n', 'u', coalesce(pg_catalog.hashtext(string_agg(r.oid::text || '=' || r.rolname, ',' ORDER BY r.oid)), 0), 0
  FROM pg_catalog.pg_roles r WHERE r.oid IN (SELECT proowner FROM pg_catalog.pg_proc WHERE prosecdef)`

// currentSnapshot is what a poll compares before it scans (see above): the primary's current
// snapshot and the time its server started, so that another server answering at the same address
// (a failover) never reads as the last one did.
const currentSnapshot = "pg_catalog.pg_current_snapshot()::text || ' ' || pg_catalog.pg_postmaster_start_time()::text"

// currentSnapshotQuery reads currentSnapshot.
const currentSnapshotQuery = "SELECT " + currentSnapshot

// queryChangeMarkers runs changeMarkersQuery from since (from its own snapshot when since is not
// known yet): the names of the rows written since that since did not select, and the markers the
// next poll starts from.
func queryChangeMarkers(ctx context.Context, conn *pgx.Conn, since changeMarkers) (classify.CatalogueChanges, changeMarkers, error) {
	var current string
	if err := conn.QueryRow(ctx, currentSnapshotQuery).Scan(&current); err != nil {
		return classify.CatalogueChanges{}, since, err
	}
	if since.known && since.snapshot == current {
		return classify.CatalogueChanges{}, since, nil // no transaction ended: nothing to select
	}
	var from any // NULL: the query's own snapshot
	if since.known {
		from = strconv.FormatUint(uint64(since.xmin), 10)
	}
	rows, err := conn.Query(ctx, changeMarkersQuery, from)
	if err != nil {
		return classify.CatalogueChanges{}, since, err
	}
	var found classify.CatalogueChanges
	next := changeMarkers{selected: make(map[markedRow]struct{}), counts: make(map[byte]int64, markerCounts)}
	var snapshot bool
	var part, name string
	var oid, xmin int64
	_, err = pgx.ForEachRow(rows, []any{&part, &name, &oid, &xmin}, func() error {
		switch part {
		case "s":
			v, err := strconv.ParseUint(name, 10, 32)
			if err != nil {
				return err
			}
			next.xmin, snapshot = uint32(v), true
			return nil
		case "S":
			next.snapshot = name
			return nil
		case "M":
			next.schemasHeld = append(next.schemasHeld, name)
			return nil
		case "n":
			if name != "" {
				next.counts[name[0]] = oid
			}
			return nil
		}
		if part == "m" {
			next.schemasSelected = append(next.schemasSelected, name)
		}
		row := markedRow{part: part[0], oid: uint32(oid), xmin: uint32(xmin)}
		next.selected[row] = struct{}{}
		if _, before := since.selected[row]; before || !since.known {
			return nil
		}
		switch part {
		case "f":
			found.Functions = append(found.Functions, name)
		case "r", "v", "p", "w":
			found.Relations = append(found.Relations, name)
		case "t":
			found.Types = append(found.Types, name)
		case "m":
			found.Schemas = append(found.Schemas, name)
		default:
			found.Everything = true
		}
		return nil
	})
	if err == nil && (!snapshot || len(next.counts) != markerCounts) {
		err = errors.New("catalog: the change markers returned no snapshot or count")
	}
	if err != nil {
		return classify.CatalogueChanges{}, since, err
	}
	next.known = true
	return found, next, nil
}

// dropped reports whether next counted fewer rows of one of the catalogues counted than since:
// one was dropped (see above).
func dropped(since, next changeMarkers, catalogue byte) bool {
	return since.known && next.counts[catalogue] < since.counts[catalogue]
}

// madeSchemasOnly reports whether the schema rows a poll selected (written: the names of those
// next selected and since did not) are schemas made and nothing else, so that reading the list of
// schemas takes them in. Known are the schemas since's scan knew existed (schemasHeld and
// schemasSelected). The count of schemas grew by as many as the rows; none of them is a known
// schema (a rename or grant of one writes its row); and every object the catalogue holds now
// (held, nil for none) sits in a known schema. An object taken in since then, in a schema made
// after that scan, may sit under a name that is gone (renamed or dropped past pgowl before this
// scan) or now another schema's (made again under that name): a read of the list alone would
// leave it there. The list itself is no evidence (every read by name reads it whole), nor is a
// row's name (it may be a new schema's). Such objects make the poll read everything, in the
// background. Temporary and TOAST schemas are not polled (unpolledSchema), nor resolved along by
// a catalogue read: they are left out.
func madeSchemasOnly(since, next changeMarkers, written []string, held *classify.Catalogue) bool {
	if !since.known || since.schemasHeld == nil || len(written) == 0 ||
		next.counts['m']-since.counts['m'] != int64(len(written)) {
		return false
	}
	known := func(name string) bool {
		return slices.Contains(since.schemasHeld, name) || slices.Contains(since.schemasSelected, name)
	}
	for _, name := range written {
		if known(name) {
			return false
		}
	}
	if held == nil {
		return true
	}
	seen := map[string]bool{}
	inPlace := func(schema string) bool {
		ok, checked := seen[schema]
		if !checked {
			ok = unpolledSchema(schema) || known(schema)
			seen[schema] = ok
		}
		return ok
	}
	data := held.Data()
	return everyInPlace(data.Functions, func(f *classify.Function) string { return f.Schema }, inPlace) &&
		everyInPlace(data.Views, func(v *classify.View) string { return v.Schema }, inPlace) &&
		everyInPlace(data.Relations, func(r *classify.Relation) string { return r.Schema }, inPlace) &&
		everyInPlace(data.Types, func(t *classify.Type) string { return t.Schema }, inPlace) &&
		everyInPlace(data.Operators, func(o *classify.Operator) string { return o.Schema }, inPlace)
}

// everyInPlace reports whether inPlace holds for the schema (schemaOf) of every one of objects.
func everyInPlace[T any](objects []T, schemaOf func(*T) string, inPlace func(string) bool) bool {
	for i := range objects {
		if !inPlace(schemaOf(&objects[i])) {
			return false
		}
	}
	return true
}

// unpolledSchema reports whether the polls leave name out, as changeMarkersQuery's ns does: a
// session's temporary schema, and the TOAST schemas.
func unpolledSchema(name string) bool {
	return strings.HasPrefix(name, "pg_temp_") || strings.HasPrefix(name, "pg_toast")
}

// renamedDefiner reports whether the names of the roles that own SECURITY DEFINER functions
// changed between since and next (the 'u' marker is a hash of them): such a function's body
// resolves "$user" as its owner's name, and pg_authid, a shared catalogue only superusers read,
// carries no xmin the polls can select.
func renamedDefiner(since, next changeMarkers) bool {
	return since.known && next.counts['u'] != since.counts['u']
}

// wentBack reports whether next's snapshot xmin is behind since's: the primary is another one
// (a failover), which may have used transaction IDs below since's for what it wrote.
func wentBack(since, next changeMarkers) bool {
	return since.known && int32(next.xmin-since.xmin) < 0
}

// toldNames are the names sessions told the Manager of (Changed, and the changes they patch in),
// in the current poll's interval and the one before: a poll leaves them out (see above).
type toldNames struct {
	now, before map[toldName]struct{}
}

type toldName struct {
	part byte
	name string
}

// note records the names of changes.
func (t *toldNames) note(changes *classify.CatalogueChanges) {
	if changes == nil {
		return
	}
	if t.now == nil {
		t.now = make(map[toldName]struct{})
	}
	for _, l := range [...]struct {
		part  byte
		names []string
	}{{'f', changes.Functions}, {'r', changes.Relations}, {'t', changes.Types}, {'m', changes.Schemas}} {
		for _, name := range l.names {
			t.now[toldName{l.part, name}] = struct{}{}
		}
	}
}

// untold returns found without the names told in the last two intervals.
func (t *toldNames) untold(found classify.CatalogueChanges) classify.CatalogueChanges {
	keep := func(part byte, names []string) []string {
		var out []string
		for _, name := range names {
			key := toldName{part, name}
			_, now := t.now[key]
			_, before := t.before[key]
			if !now && !before {
				out = append(out, name)
			}
		}
		return out
	}
	return classify.CatalogueChanges{Everything: found.Everything, Schemas: keep('m', found.Schemas),
		Functions: keep('f', found.Functions), Relations: keep('r', found.Relations), Types: keep('t', found.Types)}
}

// anyOf reports whether a name of one of parts ('f', 'r', 't', 'm') was told of in the last two
// intervals.
func (t *toldNames) anyOf(parts ...byte) bool {
	for _, m := range []map[toldName]struct{}{t.now, t.before} {
		for name := range m {
			if slices.Contains(parts, name.part) {
				return true
			}
		}
	}
	return false
}

// rotate starts a new interval: the names told before the last one are forgotten.
func (t *toldNames) rotate() {
	t.before, t.now = t.now, nil
}

// pollLater (re)arms db's poll for after, when polls are on and a whole read has given them a
// start. db.mu must be held.
func (m *Manager) pollLater(db *database, after time.Duration) {
	if m.opts.ChangePollInterval <= 0 || !db.markers.known || m.closed.Load() {
		return
	}
	if db.poll == nil {
		db.poll = time.AfterFunc(after, func() { m.pollChanges(db) })
	} else {
		db.poll.Reset(after)
	}
}

// pollsUnused is how many polls in a row may find a database unused (Held and Catalogue not
// called) before its polls stop until its next use (noteUse).
func (m *Manager) pollsUnused() int {
	unused := m.opts.ChangePollsWhileUnused
	if unused <= 0 {
		unused = time.Minute
	}
	return max(1, int(unused/m.opts.ChangePollInterval))
}

// noteUse records that a statement asked for db's catalogue, and starts its polls again if they
// stopped for want of use. It costs two atomic loads when db was used since the last poll. A use
// that finds the polls stopped, or one that comes while another starts them again, finds
// resuming set once it returns (it is set before pollsStopped is cleared), and so waits for the
// poll (Catalogue) or counts the catalogue as not current (Held).
func (m *Manager) noteUse(db *database) {
	if db.used.Load() && !db.pollsStopped.Load() {
		return
	}
	db.used.Store(true)
	if db.pollsStopped.Load() {
		db.mu.Lock()
		if db.pollsStopped.Load() {
			if !m.closed.Load() && db.markers.known && m.opts.ChangePollInterval > 0 {
				// pollLater arms the poll: its end ends the resume.
				db.resumed = make(chan struct{})
				db.resuming.Store(true)
			}
			db.pollsStopped.Store(false)
			m.pollLater(db, 0)
		}
		db.mu.Unlock()
	}
}

// awaitResumed waits, at most wait, for the poll that starts db's polls again (noteUse) to end;
// what it found is then pending, and Catalogue waits for its read as for a session's change.
func (m *Manager) awaitResumed(db *database, wait time.Duration) {
	db.mu.Lock()
	resumed := db.resumed
	db.mu.Unlock()
	if resumed == nil {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-resumed:
	case <-timer.C:
	}
}

// endResume (db.mu held) ends the poll that started db's polls again, if this was it: what it
// found (nil, or empty: nothing) counts as changed, as a session's change does, so that
// Catalogue waits for its read (started by the caller, or running).
func (m *Manager) endResume(db *database, found *classify.CatalogueChanges) {
	if db.resumed == nil {
		return
	}
	if found != nil && !found.Empty() {
		db.generation++
		db.changed = db.generation
		db.dirty.Store(true)
	}
	close(db.resumed)
	db.resumed = nil
	db.resuming.Store(false)
}

// pollChanges runs one poll of db's change markers (see above) over the poll's own connection,
// and has what it finds read by name in the background: at once, or, when a read or a session's
// patch runs, once it ends (pollFound).
func (m *Manager) pollChanges(db *database) {
	db.mu.Lock()
	if m.closed.Load() || db.cat.Load() == nil || !db.markers.known || db.polling {
		if !db.polling {
			m.endResume(db, nil) // nothing to poll from: the next whole read finds it all
		}
		db.mu.Unlock()
		return // a poll running re-arms the timer when it ends, and ends a resume
	}
	if db.used.Swap(false) {
		db.unusedPolls = 0
	} else if db.unusedPolls++; db.unusedPolls >= m.pollsUnused() {
		db.pollsStopped.Store(true) // until noteUse
		if db.used.Load() && db.pollsStopped.Swap(false) {
			m.pollLater(db, m.opts.ChangePollInterval) // used meanwhile: noteUse saw the polls running
		} else {
			m.opts.Logger.Debug().Str("database", db.name).Msg("the catalogue's change markers are not polled until the database is used again")
			if conn := db.pollConn; conn != nil {
				db.pollConn, db.pollConnNode = nil, ""
				go conn.Close(context.Background())
			}
		}
		db.mu.Unlock()
		return
	}
	conn, node, since, epoch := db.pollConn, db.pollConnNode, db.markers, db.markersEpoch
	// The schemas held now, all committed before the scan below: what the next poll compares the
	// schema rows it selects with (madeSchemasOnly). None held: not known.
	var heldSchemas []string
	if cat := db.cat.Load(); cat != nil {
		heldSchemas = cat.Data().Schemas
	}
	db.pollConn, db.pollConnNode, db.polling = nil, "", true // the poll's own while it runs
	db.mu.Unlock()

	var moved bool
	found, next, err := func() (classify.CatalogueChanges, changeMarkers, error) {
		var err error
		if conn, node, err = m.connection(db, conn, node); err != nil {
			return classify.CatalogueChanges{}, since, err
		}
		db.mu.Lock()
		moved = db.movedAway(node)
		db.mu.Unlock()
		if moved {
			// The markers come from the node last read whole, and say nothing of this one's
			// rows: the whole read primaryMoved starts takes this one's.
			return classify.CatalogueChanges{}, since, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.LoadTimeout)
		defer cancel()
		return queryChangeMarkers(ctx, conn, since)
	}()

	db.mu.Lock()
	defer db.mu.Unlock()
	// A poll that found nothing, failed or was overtaken ends a resume as it is; one that found
	// rows marks them changed first (below).
	defer m.endResume(db, nil)
	db.polling = false
	if err != nil {
		if conn != nil {
			go conn.Close(context.Background())
		}
		if !m.closed.Load() {
			m.opts.Logger.Debug().Err(err).Str("database", db.name).Msg("could not read the catalogue's change markers; polled again later")
		}
		m.pollLater(db, m.opts.ChangePollInterval)
		return
	}
	if m.closed.Load() {
		go conn.Close(context.Background())
		return
	}
	if moved && db.movedAway(node) && !m.foundPrimary(node) {
		// Kept while no primary is found, to a node other than the last whole read's: not a
		// move to take; polled again once a primary is found.
		go conn.Close(context.Background())
		m.pollLater(db, m.opts.ChangePollInterval)
		return
	}
	db.pollConn, db.pollConnNode = conn, node
	if moved {
		if db.movedAway(node) { // not read whole from it since this poll looked
			m.primaryMoved(db, node)
		}
		m.pollLater(db, m.opts.ChangePollInterval) // armed again once markers are known
		return
	}
	if db.markersEpoch != epoch {
		// A whole read started the markers again meanwhile: they are newer than this poll's.
		m.pollLater(db, m.opts.ChangePollInterval)
		return
	}
	if (dropped(since, next, 'f') && !db.told.anyOf('f')) ||
		((dropped(since, next, 'v') || dropped(since, next, 'D')) && !db.told.anyOf('r', 't')) ||
		dropped(since, next, 'o') || dropped(since, next, 'k') ||
		dropped(since, next, 'd') || dropped(since, next, 'c') || dropped(since, next, 'y') || dropped(since, next, 'i') ||
		dropped(since, next, 'm') || renamedDefiner(since, next) ||
		wentBack(since, next) {
		// A session's drop of a function is told with its names, and read by them.
		found.Everything = true
	}
	if next.schemasHeld == nil {
		next.schemasHeld = heldSchemas // read before the scan (see madeSchemasOnly)
	}
	// A read or patch running may store objects read before a rename this scan saw: only the
	// whole catalogue then.
	if len(found.Schemas) > 0 && (db.loading != nil || db.patching || !madeSchemasOnly(since, next, found.Schemas, db.cat.Load())) {
		found.Everything = true
	}
	found = db.told.untold(found)
	db.told.rotate()
	if len(found.Functions)+len(found.Relations)+len(found.Types)+len(found.Schemas) > maxChangedNamesRead {
		// Past the bound of a read by name, the whole catalogue is read.
		found = classify.CatalogueChanges{Everything: true}
	}
	if found.Empty() {
		db.markers = next
		m.pollLater(db, m.opts.ChangePollInterval)
		return
	}
	db.markers = next
	m.opts.Logger.Debug().Str("database", db.name).Strs("functions", found.Functions).Strs("relations", found.Relations).
		Strs("types", found.Types).Strs("schemas", found.Schemas).Bool("everything", found.Everything).Msg("catalogue rows written past pgowl; reading them")
	if db.pending.Empty() {
		db.pending = found
	} else {
		db.pending.Merge(&found)
	}
	m.endResume(db, &found)
	if db.loading == nil {
		m.startLoad(db)
	} else {
		db.pollFound = true // read once the read or patch running ends
	}
	m.pollLater(db, m.opts.ChangePollInterval)
}
