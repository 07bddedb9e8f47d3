package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/classify"
)

// Overrides are the configured assertions about functions (classify.functions), each written as
// schema.name(argtypes) or name(argtypes) and resolved by the database itself (to_regprocedure).
type Overrides struct {
	Readonly []string
	Writes   []string
}

// Load reads one database's whole catalogue over conn: its functions (pg_proc, with bodies, argument
// types, settings and comments), views (pg_get_viewdef), relations, types, operators and casts, and
// the role and database defaults of search_path. Each part is read in its own statement, after
// every change committed before Load was called; an object dropped or changed while it is read is
// read again or, when it is gone, left out (see readRows), so DDL running beside a load never fails
// it, and a read never makes such DDL fail (giveWayToDDL). conn must be connected to database; Load
// leaves it idle with its search_path, lock_timeout and jit as the session's defaults make them.
func Load(ctx context.Context, conn *pgx.Conn, database string, overrides Overrides) (*classify.Catalogue, error) {
	data, _, err := loadData(ctx, conn, database, overrides)
	if _, resetErr := conn.Exec(ctx, "RESET search_path; RESET lock_timeout; RESET jit"); err == nil && resetErr != nil {
		err = fmt.Errorf("catalog: reset search_path, lock_timeout and jit: %w", resetErr)
	}
	if err != nil {
		return nil, err
	}
	return classify.NewCatalogueOwning(*data), nil // the data read is the catalogue's alone
}

// prepareConnection readies a connection that reads catalogues again and again: every name
// qualified in what pg_get_viewdef and friends print, the reads planned once (they are index
// lookups by name, which planning again on every run would cost more than running), and no JIT
// (withoutJIT). It refuses a node in recovery; a primary does not turn into a standby without a
// restart, which closes the connection.
func prepareConnection(ctx context.Context, conn *pgx.Conn) error {
	if err := checkPrimary(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SET search_path = pg_catalog; SET plan_cache_mode = force_generic_plan; "+withoutJIT+"; "+giveWayToDDL()); err != nil {
		return fmt.Errorf("catalog: prepare the connection: %w", err)
	}
	return nil
}

// withoutJIT turns off the server's JIT compilation for the catalogue's reads. Their plans run
// subqueries per relation, whose estimated cost passes jit_above_cost (100000 by default) on a
// database of a few hundred tables: PostgreSQL then compiles the query's expressions with LLVM,
// which cost 55-60 ms per read of the relations on 1000 tables (2-3 times the read itself,
// BenchmarkLoadManyTables), on every whole read and again on the next.
const withoutJIT = "SET jit = off"

// giveWayToDDL is a statement that sets the connection's lock_timeout to half the server's
// deadlock_timeout, at most maxLockWait, so that a catalogue read never waits on a lock long
// enough to be the one that stays in a deadlock.
//
// pg_get_viewdef locks each view it prints, and the relations that view reads, until its
// statement ends, in the order the read meets them; DROP SCHEMA ... CASCADE and other DDL over
// many objects lock them in the order they walk their dependencies. The
// two can each hold a view the other waits for. PostgreSQL breaks the deadlock by failing the
// statement that has waited deadlock_timeout first, which could be the user's DDL: a migration
// failed by its proxy's bookkeeping. With a shorter lock_timeout the read always gives up first
// (lock_not_available), its locks go, the DDL goes on, and the read is run again (waitingOutLocks).
func giveWayToDDL() string {
	return "SELECT pg_catalog.set_config('lock_timeout', " + lockWaitBelowDeadlockTimeout(maxLockWait) + ", false)"
}

// lockWaitBelowDeadlockTimeout is an SQL expression for a lock_timeout of half the session's
// deadlock_timeout, at most limit and at least 1 ms, in milliseconds. It reads the setting with
// current_setting (no scan of pg_settings), whose text ("1s", "150ms", "1min") reads as an interval.
func lockWaitBelowDeadlockTimeout(limit time.Duration) string {
	return "greatest(1, least(" + strconv.FormatInt(max(limit.Milliseconds(), 1), 10) +
		", pg_catalog.date_part('epoch', pg_catalog.current_setting('deadlock_timeout')::pg_catalog.interval) * 500))" +
		"::pg_catalog.int4::pg_catalog.text || 'ms'"
}

// maxLockWait bounds a catalogue read's lock_timeout (giveWayToDDL): a read that meets a lock held
// longer waits again in slices of it (lockWaitRetries), its own locks let go between them.
const maxLockWait = 100 * time.Millisecond

// lockWaitRetries is how often waitingOutLocks runs a read again that gave up waiting on a lock
// (lockWaited), before it treats that as any other failure: each try waits on the lock up to the
// connection's lock_timeout, so together they wait about as long as a read without the bound would
// wait for a DDL statement of a few seconds.
const lockWaitRetries = 50

// lockWaited reports whether err is a statement that gave up waiting on a lock (lock_timeout,
// lock_not_available), which the same statement run again may take once the holder commits.
func lockWaited(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// waitingOutLocks runs read, and runs it again while it gives up waiting on a lock (lockWaited),
// up to lockWaitRetries times: every read of a load goes through it (the parts in readRows; the
// role check, the schemas, the default search paths, the assertions, and the statement that
// narrows search_path, whose function lookups can meet a locked pg_proc). Under the connection's
// short lock_timeout (giveWayToDDL) such a read would otherwise fail where, without it, it waited:
// DDL holding what a part reads, or a system catalogue held by VACUUM FULL or LOCK TABLE for
// longer than maxLockWait. read must start over each time it is called.
func waitingOutLocks(read func() error) error {
	err := read()
	for tries := 0; lockWaited(err) && tries < lockWaitRetries; tries++ {
		err = read()
	}
	return err
}

// loadData reads a whole catalogue's data and the resolved overrides (function OID → kind); it
// leaves the connection's search_path at pg_catalog and its lock_timeout short (giveWayToDDL).
func loadData(ctx context.Context, conn *pgx.Conn, database string, overrides Overrides) (*classify.CatalogueData, map[uint32]string, error) {
	data := classify.CatalogueData{Database: database, LoadedAt: time.Now(), DefaultSearchPath: map[string][]string{}}
	if err := waitingOutLocks(func() error { return checkPrimary(ctx, conn) }); err != nil {
		return nil, nil, err
	}
	// The configured overrides name functions the way a client would, so they are resolved with
	// the connection's own search_path, before it is narrowed below.
	assertions, warnings, err := resolveOverrides(ctx, conn, database, overrides)
	if err != nil {
		return nil, nil, err
	}
	data.Warnings = append(data.Warnings, warnings...)
	if err := loadDefaultSearchPaths(ctx, conn, &data); err != nil {
		return nil, nil, err
	}
	if err := loadSchemas(ctx, conn, &data); err != nil {
		return nil, nil, err
	}
	// With only pg_catalog on the path, pg_get_viewdef and pg_get_functiondef qualify every other name.
	// Its lookups of functions (set_config and the like) can meet a locked pg_proc as well.
	if err := waitingOutLocks(func() error {
		_, err := conn.Exec(ctx, "SET search_path = pg_catalog; "+withoutJIT+"; "+giveWayToDDL())
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("catalog: set search_path and lock_timeout: %w", err)
	}
	all := filter{}
	for _, part := range []func() error{
		func() (err error) {
			data.Functions, err = readFunctions(ctx, conn, all, assertions, &data.Warnings)
			return err
		},
		func() (err error) { data.Views, err = readRows(ctx, conn, viewsPart, all, &data.Warnings); return err },
		func() (err error) {
			data.Relations, err = readRows(ctx, conn, relationsPart, all, &data.Warnings)
			return err
		},
		func() (err error) { data.Types, err = readRows(ctx, conn, typesPart, all, &data.Warnings); return err },
		func() (err error) {
			data.Operators, err = readRows(ctx, conn, operatorsPart, all, &data.Warnings)
			return err
		},
		func() (err error) { data.Casts, err = readRows(ctx, conn, castsPart, all, &data.Warnings); return err },
		func() (err error) {
			data.FieldCasts, err = readRows(ctx, conn, fieldCastsPart, all, &data.Warnings)
			return err
		},
	} {
		if err := part(); err != nil {
			return nil, nil, err
		}
	}
	data.Relations = withoutViewsUnread(data.Views, data.Relations)
	return &data, assertions, nil
}

// withoutViewsUnread returns rels without the views (outside pg_catalog and information_schema,
// which viewsPart reads) that views does not hold: one left out of the views read (readRows:
// pg_get_viewdef waited past every retry on a lock DDL holds on the view or a relation it reads,
// or kept failing) or made between the two reads. Kept, its row would make the view a plain
// relation to the classifier, whose reads read nothing else: a SELECT of a view that calls a
// writing function would be a read. Without it, the name is unknown (a write of unknown effect)
// and looked up, that is read again, when a statement uses it.
func withoutViewsUnread(views []classify.View, rels []classify.Relation) []classify.Relation {
	held := make(map[uint32]bool, len(views))
	for i := range views {
		held[views[i].OID] = true
	}
	return slices.DeleteFunc(rels, func(r classify.Relation) bool {
		return r.Kind == 'v' && r.Schema != "pg_catalog" && r.Schema != "information_schema" && !held[r.OID]
	})
}

// checkPrimary refuses a node in recovery: a standby may not have every committed change yet.
func checkPrimary(ctx context.Context, conn *pgx.Conn) error {
	var inRecovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		return fmt.Errorf("catalog: ask the node's role: %w", err)
	}
	if inRecovery {
		return errors.New("catalog: the node is in recovery (a standby); the catalogue is read from the primary")
	}
	return nil
}

// resolveOverrides resolves the configured assertions with to_regprocedure, in the connection's
// default search_path.
func resolveOverrides(ctx context.Context, conn *pgx.Conn, database string, overrides Overrides) (assertions map[uint32]string, warnings []string, err error) {
	if len(overrides.Readonly)+len(overrides.Writes) == 0 {
		return map[uint32]string{}, nil, nil
	}
	err = waitingOutLocks(func() (err error) {
		assertions, warnings, err = resolveOverridesOnce(ctx, conn, database, overrides)
		return err
	})
	return assertions, warnings, err
}

// resolveOverridesOnce is one try of resolveOverrides: an entry whose lookup gave up waiting on a
// lock fails the try, so that it is made again rather than the entry dropped with a warning.
func resolveOverridesOnce(ctx context.Context, conn *pgx.Conn, database string, overrides Overrides) (map[uint32]string, []string, error) {
	assertions := map[uint32]string{}
	var warnings []string
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, fmt.Errorf("catalog: begin: %w", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO DEFAULT"); err != nil {
		return nil, nil, fmt.Errorf("catalog: set search_path: %w", err)
	}
	for _, list := range []struct {
		kind    string
		entries []string
	}{{"readonly", overrides.Readonly}, {"writes", overrides.Writes}} {
		for _, entry := range list.entries {
			var oid *uint32
			if _, err := tx.Exec(ctx, "SAVEPOINT entry"); err != nil {
				return nil, nil, fmt.Errorf("catalog: savepoint: %w", err)
			}
			if err := tx.QueryRow(ctx, "SELECT to_regprocedure($1)::oid", entry).Scan(&oid); err != nil {
				if lockWaited(err) {
					return nil, nil, fmt.Errorf("catalog: resolve %q: %w", entry, err)
				}
				warnings = append(warnings, fmt.Sprintf("classify.functions.%s: %q: %v", list.kind, entry, err))
				if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT entry"); err != nil {
					return nil, nil, fmt.Errorf("catalog: rollback to savepoint: %w", err)
				}
				continue
			}
			if oid == nil {
				warnings = append(warnings, fmt.Sprintf("classify.functions.%s: %q names no function in database %q", list.kind, entry, database))
				continue
			}
			if previous := assertions[*oid]; previous != "writes" {
				assertions[*oid] = list.kind
			}
		}
	}
	return assertions, warnings, nil
}

// part is one kind of catalogue object and the query that reads it. The query has one %s, where
// the filter goes (with the name of the object's OID column as oidColumn and of its name column as
// nameColumn), and reads the objects in OID order.
type part[T any] struct {
	what  string
	query string
	// wholeQuery, when set, is the query that reads every object (a filter with no names and no
	// range), with the same %s and columns: one cheaper for all objects than query.
	wholeQuery string
	oidColumn  string
	nameColumn string
	scan       func(pgx.CollectableRow, *T) error
}

// filter selects the objects a read covers: all (Names nil), or those called one of Names. First
// and Last narrow it to an OID range when a read is split (see readRows).
type filter struct {
	Names       []string
	First, Last uint32
	ranged      bool
}

// sql renders the filter for p's query; args are its parameters.
func (f filter) sql(oidColumn, nameColumn string) (string, []any) {
	conditions, args := []string{"true"}, []any{}
	if f.Names != nil {
		args = append(args, f.Names)
		conditions = append(conditions, fmt.Sprintf("%s = ANY($%d::text[])", nameColumn, len(args)))
	}
	if f.ranged {
		args = append(args, f.First, f.Last)
		conditions = append(conditions, fmt.Sprintf("%s BETWEEN $%d::oid AND $%d::oid", oidColumn, len(args)-1, len(args)))
	}
	return strings.Join(conditions, " AND "), args
}

// readAttempts is how often a read is tried whole before it is split; splitDepth bounds the
// halvings of the OID range (2^32 OIDs: 32 halvings reach one object).
const (
	readAttempts = 3
	splitDepth   = 33
)

// readRows reads p's objects that f selects. A read can fail while DDL runs beside it: functions
// such as pg_get_viewdef and format_type look objects up in the server's caches, which already
// miss an object that the statement's snapshot still lists ("could not open relation with OID N",
// "cache lookup failed for type N"). Such a read is tried again, with a new snapshot in which the
// object is gone; if it keeps failing, the OID range is halved until the failing objects are
// alone, and those are left out with a warning. A read that gives up waiting on a lock (the
// connection's lock_timeout, giveWayToDDL) is run again as the other reads are (waitingOutLocks);
// one still held after that is split at once. Only a broken connection fails the read.
func readRows[T any](ctx context.Context, conn *pgx.Conn, p part[T], f filter, warnings *[]string) ([]T, error) {
attempts:
	for attempt := 0; attempt < readAttempts; attempt++ {
		var list []T
		err := waitingOutLocks(func() (err error) { list, err = queryPart(ctx, conn, p, f); return err })
		switch {
		case err == nil:
			return list, nil
		case lockWaited(err):
			break attempts // held past every slice: the objects still held are found and left out below
		case !objectError(err):
			return nil, fmt.Errorf("catalog: read %s: %w", p.what, err)
		}
	}
	return splitRead(ctx, conn, p, filter{Names: f.Names, First: 0, Last: ^uint32(0), ranged: true}, warnings, 0)
}

// splitRead reads the range f in halves until the objects that fail are alone.
func splitRead[T any](ctx context.Context, conn *pgx.Conn, p part[T], f filter, warnings *[]string, depth int) ([]T, error) {
	list, err := queryPart(ctx, conn, p, f)
	switch {
	case err == nil:
		return list, nil
	case !objectError(err):
		return nil, fmt.Errorf("catalog: read %s: %w", p.what, err)
	case f.First == f.Last || depth >= splitDepth:
		*warnings = append(*warnings, fmt.Sprintf("catalog: left out %s with OID %d..%d: %v", p.what, f.First, f.Last, err))
		return nil, nil
	}
	middle := f.First + (f.Last-f.First)/2
	low, err := splitRead(ctx, conn, p, filter{Names: f.Names, First: f.First, Last: middle, ranged: true}, warnings, depth+1)
	if err != nil {
		return nil, err
	}
	high, err := splitRead(ctx, conn, p, filter{Names: f.Names, First: middle + 1, Last: f.Last, ranged: true}, warnings, depth+1)
	if err != nil {
		return nil, err
	}
	return append(low, high...), nil
}

// queryPart runs p's query with filter f.
func queryPart[T any](ctx context.Context, conn *pgx.Conn, p part[T], f filter) ([]T, error) {
	condition, args := f.sql(p.oidColumn, p.nameColumn)
	query := p.query
	if p.wholeQuery != "" && f.Names == nil && !f.ranged {
		query = p.wholeQuery
	}
	rows, err := conn.Query(ctx, fmt.Sprintf(query, condition), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) {
		var v T
		err := p.scan(row, &v)
		return v, err
	})
}

// objectError reports whether err is the server's complaint about one object (a missing relation,
// type or function, an internal cache lookup failure) rather than a broken connection or a bad
// query: reading again may not meet it.
func objectError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "XX000", // internal_error: cache lookup failed, could not open relation with OID
		"42P01",          // undefined_table
		"42704",          // undefined_object
		"42883",          // undefined_function
		"40001", "40P01", // serialization failure, deadlock
		"55P03": // lock_not_available: waited lock_timeout on an object DDL holds (giveWayToDDL)
		return true
	}
	return false
}

// readFunctions reads the functions f selects, with the assertions that apply to them.
func readFunctions(ctx context.Context, conn *pgx.Conn, f filter, assertions map[uint32]string, warnings *[]string) ([]classify.Function, error) {
	list, err := readRows(ctx, conn, functionsPart, f, warnings)
	for i := range list {
		list[i].Override = assertions[list[i].OID]
	}
	return list, err
}

// functionsPart reads pg_proc outside pg_catalog.
var functionsPart = part[classify.Function]{
	what: "pg_proc", oidColumn: "p.oid", nameColumn: "p.proname",
	query: `
SELECT p.oid, n.nspname, p.proname, l.lanname, p.provolatile::text, p.prokind::text, p.proretset,
       coalesce(p.prosrc, ''),
       CASE WHEN p.prosqlbody IS NOT NULL THEN pg_get_functiondef(p.oid) ELSE '' END,
       p.proargtypes::oid[],
       ARRAY(SELECT format_type(u.t, NULL) FROM unnest(p.proargtypes) WITH ORDINALITY AS u(t, i) ORDER BY u.i),
       CASE WHEN p.proargnames IS NULL THEN '{}'::text[] ELSE ARRAY(
         SELECT coalesce(p.proargnames[i], '') FROM generate_subscripts(p.proargnames, 1) AS i
         WHERE p.proargmodes IS NULL OR p.proargmodes[i] IN ('i', 'b', 'v') ORDER BY i) END,
       p.pronargdefaults::int, coalesce(pg_get_expr(p.proargdefaults, 0), ''), p.provariadic <> 0,
       coalesce(pg_get_function_arguments(p.oid), ''),
       CASE WHEN p.prokind = 'p' THEN '' ELSE coalesce(pg_get_function_result(p.oid), '') END,
       coalesce(p.proconfig, '{}'),
       coalesce(d.description, ''),
       CASE WHEN p.prokind <> 'a' THEN '{}'::oid[] ELSE
         ARRAY(SELECT x FROM pg_aggregate a CROSS JOIN LATERAL (VALUES (a.aggtransfn::oid), (a.aggfinalfn::oid),
                 (a.aggcombinefn::oid), (a.aggserialfn::oid), (a.aggdeserialfn::oid), (a.aggmtransfn::oid),
                 (a.aggminvtransfn::oid), (a.aggmfinalfn::oid)) AS v(x) WHERE a.aggfnoid = p.oid AND x <> 0) END,
       CASE WHEN p.prosecdef THEN pg_get_userbyid(p.proowner)::text ELSE '' END
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_language l ON l.oid = p.prolang
LEFT JOIN pg_description d ON d.objoid = p.oid AND d.classoid = 'pg_proc'::regclass AND d.objsubid = 0
WHERE n.nspname <> 'pg_catalog' AND %s
ORDER BY p.oid`,
	scan: func(row pgx.CollectableRow, f *classify.Function) error {
		var volatility, kind string
		if err := row.Scan(&f.OID, &f.Schema, &f.Name, &f.Language, &volatility, &kind, &f.ReturnsSet, &f.Source,
			&f.SQLBody, &f.ArgTypes, &f.ArgTypeNames, &f.ArgNames, &f.Defaults, &f.DefaultExprs, &f.Variadic, &f.Arguments, &f.Result,
			&f.Config, &f.Comment, &f.Calls, &f.DefinerUser); err != nil {
			return err
		}
		if volatility != "" {
			f.Volatility = volatility[0]
		}
		if kind != "" {
			f.Kind = kind[0]
		}
		return nil
	},
}

// viewsPart reads the views outside pg_catalog and information_schema with their definitions.
var viewsPart = part[classify.View]{
	what: "views", oidColumn: "c.oid", nameColumn: "c.relname",
	query: `
SELECT c.oid, n.nspname, c.relname, coalesce(pg_get_viewdef(c.oid), '')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'v' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND %s
ORDER BY c.oid`,
	scan: func(row pgx.CollectableRow, v *classify.View) error {
		return row.Scan(&v.OID, &v.Schema, &v.Name, &v.Definition)
	},
}

// relationsPart reads every table-like relation (pg_catalog's too), whether reading it reads
// unlogged data, the read policies row security runs, and what writing it runs besides the
// statement (Relation.WriteRuns, WriteRule, Reaches). The defaults and CHECK constraints are
// printed in ways that lock no table (a default holds no column, so it needs none to print; the
// constraint's printer names columns from the system caches): pg_get_expr with a relation
// locks it on newer servers, and a read that locked every table with a default would wait for
// any DDL on one of them. A generation expression names columns, so it is printed with its
// table, which newer servers lock: only tables with generated columns. A column of a domain with
// CHECK constraints runs them: a cast of NULL to the domain stands for that. The foreign keys
// that reference each table are gathered once (no index of pg_constraint covers confrelid).
//
// A read of every relation gathers the triggers, defaults, constraints and domain columns of all
// of them at once, each kind in one pass grouped by relation (wholeQuery); a read of some
// relations, by name or by OID range, looks them up for each relation it reads (query). On 1000
// tables with a trigger, two defaults and a CHECK each, the whole read takes 27 ms grouped and 40
// ms looked up per relation (EXPLAIN ANALYZE, PostgreSQL 15, no JIT); a read by name of one
// table would cost the whole passes. A read split by OID range after an object failed it
// (readRows) must look up per relation, so that the range it reads holds the failing object.
var relationsPart = part[classify.Relation]{
	what: "relations", oidColumn: "c.oid", nameColumn: "c.relname",
	query:      relationsQuery(false),
	wholeQuery: relationsQuery(true),
	scan: func(row pgx.CollectableRow, r *classify.Relation) error {
		var kind string
		if err := row.Scan(&r.Schema, &r.Name, &kind, &r.Unlogged, &r.OID, &r.ReadPolicy, &r.WriteRuns, &r.WriteRule, &r.Reaches); err != nil {
			return err
		}
		if kind != "" {
			r.Kind = kind[0]
		}
		return nil
	},
}

// runsBesideWrite is one kind of thing a write of a relation runs besides the statement: the
// rows of from that satisfy where, each relation's (its OID in relation) gathered by runs, an
// aggregate. A relations read gathers it per relation read, or for every relation at once
// (relationsQuery).
type runsBesideWrite struct {
	name, relation, runs, from, where string
}

// runsBesideWrites are the kinds, in the order Relation.WriteRuns lists them. Of defaults, CHECK
// constraints and policies only those that call a function outside pg_catalog (a dependency in
// pg_depend) or a built-in that changes the session (the pattern of sfn, from
// classify.SessionChangingBuiltins) are printed, since printing costs about 25 µs each.
var runsBesideWrites = []runsBesideWrite{{
	name: "trg", relation: "g.tgrelid",
	runs:  `string_agg('(' || g.tgfoid::regproc::text || '())', ', ' ORDER BY g.tgname)`,
	from:  `pg_trigger g`,
	where: `NOT g.tgisinternal AND g.tgenabled <> 'D'`,
}, {
	name: "def", relation: "d.adrelid",
	runs: `string_agg('(' || CASE WHEN (SELECT a.attgenerated FROM pg_attribute a WHERE a.attrelid = d.adrelid AND a.attnum = d.adnum) = ''
            THEN pg_get_expr(d.adbin, 0) ELSE pg_get_expr(d.adbin, d.adrelid) END || ')', ', ' ORDER BY d.adnum)`,
	from: `pg_attrdef d`,
	where: `EXISTS (SELECT FROM pg_depend x WHERE x.classid = 'pg_attrdef'::regclass AND x.objid = d.oid AND x.refclassid IN ('pg_proc'::regclass, 'pg_operator'::regclass))
            OR d.adbin::text ~ (SELECT pattern FROM sfn)`,
}, {
	name: "chk", relation: "k.conrelid",
	runs: `string_agg('(' || regexp_replace(pg_get_constraintdef(k.oid), '^CHECK (.*?)( NO INHERIT)?( NOT VALID)?$', '\1') || ')', ', ' ORDER BY k.conname)`,
	from: `pg_constraint k`,
	where: `k.contype = 'c' AND k.conrelid <> 0 AND (
            EXISTS (SELECT FROM pg_depend x WHERE x.classid = 'pg_constraint'::regclass AND x.objid = k.oid AND x.refclassid IN ('pg_proc'::regclass, 'pg_operator'::regclass))
            OR k.conbin::text ~ (SELECT pattern FROM sfn))`,
}, {
	// Row security on a write: an UPDATE's or DELETE's own policies' USING, and the WITH CHECK of
	// INSERT, UPDATE and ALL policies (a SELECT or ALL policy's USING is the read policy, which a
	// write's relations carry as well).
	name: "pol", relation: "p.polrelid",
	runs: `string_agg(concat_ws(', ',
              CASE WHEN p.polcmd IN ('w', 'd') AND p.polqual IS NOT NULL THEN '(' || pg_get_expr(p.polqual, p.polrelid) || ')' END,
              CASE WHEN p.polwithcheck IS NOT NULL THEN '(' || pg_get_expr(p.polwithcheck, p.polrelid) || ')' END), ', ' ORDER BY p.polname)`,
	from: `pg_policy p`,
	where: `((p.polcmd IN ('w', 'd') AND p.polqual IS NOT NULL) OR p.polwithcheck IS NOT NULL)
            AND EXISTS (SELECT FROM pg_class pc WHERE pc.oid = p.polrelid AND pc.relrowsecurity) AND (
            EXISTS (SELECT FROM pg_depend x WHERE x.classid = 'pg_policy'::regclass AND x.objid = p.oid AND (x.refclassid <> 'pg_class'::regclass OR x.refobjid <> p.polrelid))
            OR p.polqual::text ~ (SELECT pattern FROM sfn) OR p.polwithcheck::text ~ (SELECT pattern FROM sfn))`,
}, {
	name: "dom", relation: "a.attrelid",
	runs: `string_agg('(NULL::' || quote_ident(tn.nspname) || '.' || quote_ident(t.typname) || ')', ', ' ORDER BY a.attnum)`,
	from: `pg_attribute a JOIN pg_type t ON t.oid = a.atttypid JOIN pg_namespace tn ON tn.oid = t.typnamespace`,
	where: `a.attnum > 0 AND NOT a.attisdropped AND t.typtype = 'd'
            AND EXISTS (SELECT FROM pg_constraint dk WHERE dk.contypid = t.oid AND dk.contype = 'c')`,
}}

// writtenRelation is the condition on a relation (class, in schema namespace) for which
// relationsQuery reads what writing it runs: a table, partitioned table, foreign table or view
// outside pg_catalog, information_schema, the temporary schemas and the toast schemas.
func writtenRelation(class, namespace string) string {
	return class + ".relkind IN ('r', 'p', 'f', 'v') AND " + namespace + ".nspname NOT IN ('pg_catalog', 'information_schema')" +
		" AND " + namespace + `.nspname NOT LIKE 'pg\_temp\_%' AND ` + namespace + `.nspname NOT LIKE 'pg\_toast%'`
}

// relationsQuery is relationsPart's query: grouped, the one that reads every relation
// (wholeQuery), else the one that reads some. What a write of a table runs is read only for
// tables, partitioned tables, foreign tables and views outside pg_catalog and
// information_schema (writtenRelation); whether a rule runs on a write, for those of pg_catalog
// too (pg_settings' rules call set_config).
func relationsQuery(grouped bool) string {
	quoted := make([]string, 0, len(classify.SessionChangingBuiltins()))
	for _, name := range classify.SessionChangingBuiltins() {
		quoted = append(quoted, "'"+name+"'")
	}
	var ctes, joins strings.Builder
	runs := make([]string, 0, len(runsBesideWrites))
	for _, kind := range runsBesideWrites {
		if grouped {
			// Only of the relations the query reads it for: printing a CHECK or a generation
			// expression locks its table, and another session's temporary table may be held.
			fmt.Fprintf(&ctes, ",\n%s AS (\n  SELECT %s AS rel, %s AS runs\n  FROM %s\n  JOIN pg_class wc ON wc.oid = %s JOIN pg_namespace wn ON wn.oid = wc.relnamespace\n  WHERE %s AND (%s)\n  GROUP BY %s)",
				kind.name, kind.relation, kind.runs, kind.from, kind.relation, writtenRelation("wc", "wn"), kind.where, kind.relation)
			fmt.Fprintf(&joins, "\nLEFT JOIN %s ON %s.rel = c.oid", kind.name, kind.name)
			runs = append(runs, kind.name+".runs")
		} else {
			runs = append(runs, fmt.Sprintf("(SELECT %s\n          FROM %s WHERE %s = c.oid AND (%s))", kind.runs, kind.from, kind.relation, kind.where))
		}
	}
	// A relation without triggers has none to look up.
	runs[0] = "CASE WHEN c.relhastriggers THEN " + runs[0] + " END"
	written := strings.ReplaceAll(writtenRelation("c", "n"), "%", "%%")
	return `
WITH fk AS (
  SELECT confrelid, array_agg(DISTINCT conrelid) AS referencing FROM pg_constraint
  WHERE contype = 'f' AND conrelid <> confrelid GROUP BY confrelid),
sfn AS (
  SELECT ':funcid (' || string_agg(oid::text, '|') || ') ' AS pattern
  FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace AND proname IN (` + strings.Join(quoted, ", ") + `))` +
		strings.ReplaceAll(ctes.String(), "%", "%%") + `
SELECT n.nspname, c.relname, c.relkind::text,
       c.relpersistence = 'u' OR (c.relhassubclass AND EXISTS (
         WITH RECURSIVE d(oid) AS (
           SELECT inhrelid FROM pg_inherits WHERE inhparent = c.oid
           UNION SELECT i.inhrelid FROM pg_inherits i JOIN d ON i.inhparent = d.oid)
         SELECT FROM d JOIN pg_class x ON x.oid = d.oid WHERE x.relpersistence = 'u')),
       c.oid,
       CASE WHEN c.relrowsecurity THEN coalesce((
         SELECT string_agg('(' || pg_get_expr(p.polqual, p.polrelid) || ')', ', ' ORDER BY p.polname)
         FROM pg_policy p WHERE p.polrelid = c.oid AND p.polcmd IN ('r', '*') AND p.polqual IS NOT NULL), '')
       ELSE '' END,
       CASE WHEN ` + written + ` THEN
       concat_ws(', ',
         ` + strings.ReplaceAll(strings.Join(runs, ",\n         "), "%", "%%") + `)
       ELSE '' END,
       c.relkind IN ('r', 'p', 'f', 'v') AND c.relhasrules AND
         EXISTS (SELECT FROM pg_rewrite w WHERE w.ev_class = c.oid AND w.rulename <> '_RETURN' AND w.ev_type <> '1'),
       CASE WHEN ` + written + ` THEN
       ARRAY(SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = c.oid
             UNION SELECT unnest(fk.referencing))::oid[]
       ELSE '{}'::oid[] END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN fk ON fk.confrelid = c.oid` + joins.String() + `
WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p', 'S')
  AND n.nspname NOT LIKE 'pg\_temp\_%%' AND n.nspname NOT LIKE 'pg\_toast%%' AND %s
ORDER BY c.oid`
}

// typesPart reads every type, with a domain's CHECK expressions.
var typesPart = part[classify.Type]{
	what: "types", oidColumn: "t.oid", nameColumn: "t.typname",
	query: `
SELECT t.oid, n.nspname, t.typname, t.typtype::text, t.typbasetype::oid,
       CASE WHEN t.typtype = 'd' THEN coalesce((
         SELECT string_agg('(' || pg_get_expr(c.conbin, 0) || ')', ', ' ORDER BY c.conname)
         FROM pg_constraint c WHERE c.contypid = t.oid AND c.contype = 'c'), '') ELSE '' END
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname NOT LIKE 'pg\_temp\_%%' AND n.nspname NOT LIKE 'pg\_toast%%' AND %s
ORDER BY t.oid`,
	scan: func(row pgx.CollectableRow, t *classify.Type) error {
		var kind string
		if err := row.Scan(&t.OID, &t.Schema, &t.Name, &kind, &t.Base, &t.Check); err != nil {
			return err
		}
		if kind != "" {
			t.Kind = kind[0]
		}
		return nil
	},
}

// operatorsPart reads the operators outside pg_catalog: an expression such as a ### b runs the
// operator's function without naming it.
var operatorsPart = part[classify.Operator]{
	what: "pg_operator", oidColumn: "o.oid", nameColumn: "o.oprname",
	query: `
SELECT n.nspname, o.oprname, o.oprcode::oid, CASE WHEN pn.nspname = 'pg_catalog' THEN p.proname ELSE '' END,
       (SELECT x.oprcode::oid FROM pg_operator x JOIN pg_proc xp ON xp.oid = x.oprcode
         WHERE x.oid = o.oprnegate AND xp.pronamespace <> 'pg_catalog'::regnamespace),
       (SELECT x.oprcode::oid FROM pg_operator x JOIN pg_proc xp ON xp.oid = x.oprcode
         WHERE x.oid = o.oprcom AND xp.pronamespace <> 'pg_catalog'::regnamespace)
FROM pg_operator o
JOIN pg_namespace n ON n.oid = o.oprnamespace
JOIN pg_proc p ON p.oid = o.oprcode
JOIN pg_namespace pn ON pn.oid = p.pronamespace
WHERE n.nspname <> 'pg_catalog' AND %s
ORDER BY o.oid`,
	scan: func(row pgx.CollectableRow, o *classify.Operator) error {
		var negator, commutator *uint32
		if err := row.Scan(&o.Schema, &o.Name, &o.Function, &o.BuiltinFunction, &negator, &commutator); err != nil {
			return err
		}
		if negator != nil {
			o.Negator = *negator
		}
		if commutator != nil {
			o.Commutator = *commutator
		}
		return nil
	},
}

// castsPart reads the casts whose function is outside pg_catalog: x::t runs it without naming it.
var castsPart = part[classify.Cast]{
	what: "pg_cast", oidColumn: "c.oid", nameColumn: "p.proname",
	query: `
SELECT c.castsource::oid, c.casttarget::oid, c.castfunc::oid
FROM pg_cast c
JOIN pg_proc p ON p.oid = c.castfunc
JOIN pg_namespace pn ON pn.oid = p.pronamespace
WHERE pn.nspname <> 'pg_catalog' AND %s
ORDER BY c.oid`,
	scan: func(row pgx.CollectableRow, c *classify.Cast) error {
		return row.Scan(&c.Source, &c.Target, &c.Function)
	},
}

// fieldCastsPart reads which composite types have a field of a type that a cast of castsPart
// converts to: ROW(...)::t may run that cast for the field.
var fieldCastsPart = part[classify.FieldCast]{
	what: "composite fields", oidColumn: "t.oid", nameColumn: "t.typname",
	query: `
SELECT DISTINCT t.oid, a.atttypid
FROM pg_type t
JOIN pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
WHERE t.typtype = 'c' AND a.atttypid IN (
  SELECT c.casttarget FROM pg_cast c JOIN pg_proc p ON p.oid = c.castfunc
  WHERE p.pronamespace <> 'pg_catalog'::regnamespace) AND %s
ORDER BY 1, 2`,
	scan: func(row pgx.CollectableRow, fc *classify.FieldCast) error {
		return row.Scan(&fc.Composite, &fc.Target)
	},
}

// loadSchemas reads the names of every schema, sorted: where an unqualified CREATE FUNCTION
// makes its function when "$user" comes first in search_path (classify.Catalogue.CreatedFunction).
func loadSchemas(ctx context.Context, conn *pgx.Conn, data *classify.CatalogueData) error {
	return waitingOutLocks(func() error {
		rows, err := conn.Query(ctx, schemasQuery)
		if err != nil {
			return fmt.Errorf("catalog: read schemas: %w", err)
		}
		data.Schemas, err = collectSchemas(rows)
		return err
	})
}

// schemasQuery reads the name of every schema.
const schemasQuery = "SELECT nspname::text FROM pg_catalog.pg_namespace"

// collectSchemas returns the schema names of schemasQuery's rows, sorted.
func collectSchemas(rows pgx.Rows) ([]string, error) {
	schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("catalog: read schemas: %w", err)
	}
	slices.Sort(schemas)
	return schemas, nil
}

// loadDefaultSearchPaths works out the search_path a new session starts with, per role: a setting for
// the role in this database, else for the role, else for this database, else the server's. It
// also reads every other role and database setting a login to this database starts with
// (LoginDefaults), from the same rows.
func loadDefaultSearchPaths(ctx context.Context, conn *pgx.Conn, data *classify.CatalogueData) error {
	return waitingOutLocks(func() error { return loadDefaultSearchPathsOnce(ctx, conn, data) })
}

// loadDefaultSearchPathsOnce is one try of loadDefaultSearchPaths; it sets data's paths and login
// defaults only once every row is read.
func loadDefaultSearchPathsOnce(ctx context.Context, conn *pgx.Conn, data *classify.CatalogueData) error {
	var server, source string
	if err := conn.QueryRow(ctx, "SELECT coalesce(reset_val, boot_val), source FROM pg_settings WHERE name = 'search_path'").Scan(&server, &source); err != nil {
		return fmt.Errorf("catalog: read search_path default: %w", err)
	}
	switch source {
	case "database", "user", "database user", "client", "session":
		// The loader's own value comes from a setting for its role or database: the server's is
		// the configuration file's, which only a superuser (or a role granted pg_file_settings)
		// may read, else the built-in default.
		server = `"$user", public`
		if file, ok := configurationFileSearchPath(ctx, conn); ok {
			server = file
		}
	}
	rows, err := conn.Query(ctx, `
SELECT coalesce(r.rolname, ''), s.setrole = 0, s.setdatabase <> 0, cfg
FROM pg_db_role_setting s
LEFT JOIN pg_roles r ON r.oid = s.setrole
CROSS JOIN LATERAL unnest(s.setconfig) AS cfg
WHERE s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))`)
	if err != nil {
		return fmt.Errorf("catalog: read role and database settings: %w", err)
	}
	defer rows.Close()
	var paths []defaultSearchPathSetting
	var logins []string
	for rows.Next() {
		var d defaultSearchPathSetting
		var everyRole bool
		var setting string
		if err := rows.Scan(&d.role, &everyRole, &d.inDatabase, &setting); err != nil {
			return fmt.Errorf("catalog: read setting row: %w", err)
		}
		if !everyRole && d.role == "" {
			continue // a dropped role's row, which no login meets
		}
		logins = append(logins, loginDefault(d.role, d.inDatabase, setting))
		if value, ok := strings.CutPrefix(setting, "search_path="); ok {
			d.value = value
			paths = append(paths, d)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("catalog: read role and database settings: %w", err)
	}
	for role, path := range defaultSearchPaths(server, paths) {
		data.DefaultSearchPath[role] = classify.SplitSearchPath(path)
	}
	slices.Sort(logins)
	data.LoginDefaults = logins
	return nil
}

// loginDefault names one role or database setting as CatalogueData.LoginDefaults holds it.
func loginDefault(role string, inDatabase bool, setting string) string {
	if role == "" {
		role = "*"
	}
	database := "*"
	if inDatabase {
		database = "this database"
	}
	return role + "@" + database + ": " + setting
}

// configurationFileSearchPath reads the search_path the server's configuration files set
// (postgresql.conf, ALTER SYSTEM), if any and if the loader may read pg_file_settings.
func configurationFileSearchPath(ctx context.Context, conn *pgx.Conn) (string, bool) {
	var setting string
	err := conn.QueryRow(ctx, `SELECT setting FROM pg_catalog.pg_file_settings
WHERE name = 'search_path' AND applied ORDER BY seqno DESC LIMIT 1`).Scan(&setting)
	return setting, err == nil
}

// defaultSearchPathSetting is one search_path default of pg_db_role_setting: for role ("" for
// every role), in this database or in every one.
type defaultSearchPathSetting struct {
	role       string
	inDatabase bool
	value      string
}

// defaultSearchPaths gives, per role with a setting of its own ("" for every other role), the
// search_path a new session starts with, whatever the order of settings: PostgreSQL applies the
// role's setting in this database over the role's, over this database's (ALTER DATABASE, or
// ALTER ROLE ALL IN DATABASE), over every role's in every database (ALTER ROLE ALL), over the
// server's.
func defaultSearchPaths(server string, settings []defaultSearchPathSetting) map[string]string {
	type level struct {
		value string
		rank  int
	}
	best := map[string]level{"": {server, 0}}
	for _, d := range settings {
		rank := 1 // every role, every database
		switch {
		case d.role != "" && d.inDatabase:
			rank = 4
		case d.role != "":
			rank = 3
		case d.inDatabase:
			rank = 2
		}
		if current, ok := best[d.role]; !ok || rank > current.rank {
			best[d.role] = level{d.value, rank}
		}
	}
	paths := make(map[string]string, len(best))
	for role, l := range best {
		paths[role] = l.value
	}
	return paths
}

// refreshNames reads again the functions, relations (with views) and types that changes names (in
// every schema) and returns oldCatalogue's data with exactly those replaced, what that changed, and the
// names to carry old's analyses past (Catalogue.KeepAnalysesFrom; nil when none may be). It
// costs one round trip: the reads are sent as one batch. When the batch fails on an object that
// changed beside it, the parts are read one by one as readRows does.
func refreshNames(ctx context.Context, conn *pgx.Conn, oldCatalogue *classify.Catalogue, changes *classify.CatalogueChanges, assertions map[uint32]string) (*classify.CatalogueData, *classify.CatalogueDelta, []string, error) {
	old := oldCatalogue.Data()
	wanted := namedReadsFor(old, changes)
	// A schema made or dropped since says where the next unqualified CREATE goes, and no name
	// tells of it: every read by name reads the schemas too, in the same round trip.
	wanted.schemas = true
	fresh, err := readNamesBatch(ctx, conn, wanted)
	if err != nil {
		if !objectError(err) {
			return nil, nil, nil, err
		}
		if fresh, err = readNamesOneByOne(ctx, conn, wanted); err != nil {
			return nil, nil, nil, err
		}
	}
	for i := range fresh.Functions {
		fresh.Functions[i].Override = assertions[fresh.Functions[i].OID]
	}
	fresh.Relations = withoutViewsUnread(fresh.Views, fresh.Relations)
	data, delta := patch(oldCatalogue, fresh, wanted)
	var keep []string
	if !changes.Everything && keepsAnalyses(old, fresh, wanted, delta) && !readsDerivedOIDs(fresh) {
		keep = wanted.names()
	}
	return data, delta, keep, nil
}

// namedReads says which names each part is read again for, and whether the list of schemas is
// read again (whole: it is short).
type namedReads struct {
	functions, relations, types, fieldCasts []string
	schemas                                 bool
}

// namedReadsFor returns the reads that changes needs: composite fields only when a cast outside
// pg_catalog could convert one (a new cast is a change of everything).
func namedReadsFor(old *classify.CatalogueData, changes *classify.CatalogueChanges) namedReads {
	r := namedReads{functions: changes.Functions, relations: changes.Relations, types: changes.Types}
	if len(old.Casts) > 0 {
		r.fieldCasts = changes.Types
	}
	return r
}

// readNamesBatch reads what wanted names in one batch, over a connection prepared for reads (see
// prepareConnection).
func readNamesBatch(ctx context.Context, conn *pgx.Conn, wanted namedReads) (*classify.CatalogueData, error) {
	batch := &pgx.Batch{}
	queue := func(names []string, query, oidColumn, nameColumn string) {
		if len(names) > 0 {
			condition, args := filter{Names: names}.sql(oidColumn, nameColumn)
			batch.Queue(fmt.Sprintf(query, condition), args...)
		}
	}
	queue(wanted.functions, functionsPart.query, functionsPart.oidColumn, functionsPart.nameColumn)
	queue(wanted.relations, viewsPart.query, viewsPart.oidColumn, viewsPart.nameColumn)
	queue(wanted.relations, relationsPart.query, relationsPart.oidColumn, relationsPart.nameColumn)
	queue(wanted.types, typesPart.query, typesPart.oidColumn, typesPart.nameColumn)
	queue(wanted.fieldCasts, fieldCastsPart.query, fieldCastsPart.oidColumn, fieldCastsPart.nameColumn)
	if wanted.schemas {
		batch.Queue(schemasQuery)
	}
	results := conn.SendBatch(ctx, batch)
	data, err := collectNames(results, wanted)
	if closeErr := results.Close(); err == nil && closeErr != nil {
		err = closeErr
	}
	return data, err
}

// collectNames reads the results of readNamesBatch in order.
func collectNames(results pgx.BatchResults, wanted namedReads) (*classify.CatalogueData, error) {
	data := &classify.CatalogueData{}
	var err error
	if len(wanted.functions) > 0 {
		if data.Functions, err = collectPart(results, functionsPart); err != nil {
			return nil, err
		}
	}
	if len(wanted.relations) > 0 {
		if data.Views, err = collectPart(results, viewsPart); err != nil {
			return nil, err
		}
		if data.Relations, err = collectPart(results, relationsPart); err != nil {
			return nil, err
		}
	}
	if len(wanted.types) > 0 {
		if data.Types, err = collectPart(results, typesPart); err != nil {
			return nil, err
		}
	}
	if len(wanted.fieldCasts) > 0 {
		if data.FieldCasts, err = collectPart(results, fieldCastsPart); err != nil {
			return nil, err
		}
	}
	if wanted.schemas {
		rows, err := results.Query()
		if err != nil {
			return nil, err
		}
		if data.Schemas, err = collectSchemas(rows); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// collectPart reads the next result of a batch as p's rows.
func collectPart[T any](results pgx.BatchResults, p part[T]) ([]T, error) {
	rows, err := results.Query()
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) {
		var v T
		err := p.scan(row, &v)
		return v, err
	})
}

// readNamesOneByOne reads what readNamesBatch reads, part by part, surviving objects that change
// while they are read.
func readNamesOneByOne(ctx context.Context, conn *pgx.Conn, wanted namedReads) (*classify.CatalogueData, error) {
	data := &classify.CatalogueData{}
	var err error
	if len(wanted.functions) > 0 {
		if data.Functions, err = readRows(ctx, conn, functionsPart, filter{Names: wanted.functions}, &data.Warnings); err != nil {
			return nil, err
		}
	}
	if len(wanted.relations) > 0 {
		if data.Views, err = readRows(ctx, conn, viewsPart, filter{Names: wanted.relations}, &data.Warnings); err != nil {
			return nil, err
		}
		if data.Relations, err = readRows(ctx, conn, relationsPart, filter{Names: wanted.relations}, &data.Warnings); err != nil {
			return nil, err
		}
	}
	if len(wanted.types) > 0 {
		if data.Types, err = readRows(ctx, conn, typesPart, filter{Names: wanted.types}, &data.Warnings); err != nil {
			return nil, err
		}
	}
	if len(wanted.fieldCasts) > 0 {
		if data.FieldCasts, err = readRows(ctx, conn, fieldCastsPart, filter{Names: wanted.fieldCasts}, &data.Warnings); err != nil {
			return nil, err
		}
	}
	if wanted.schemas {
		if err := loadSchemas(ctx, conn, data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// keepsAnalyses reports whether the analyses memoised with old may be carried past patching it
// with fresh for wanted (Catalogue.KeepAnalysesFrom, with wanted.names()): relations and types
// were added or dropped, not changed. Every relation, view and type old held under a name wanted
// reads again is in fresh unchanged (the same OID and row, and for a type the same fields that
// casts convert) or gone, and not made again under its schema and name; none added is unlogged, row-secured, a domain or in pg_catalog. An
// analysis that resolved one of the names, found or not, depends on it and is dropped
// (KeepAnalysesFrom); one that reached an object of another schema by OID reaches the same row,
// or an object PostgreSQL dropped with what depended on it. So a migration that repeats in a new
// schema the names of another schema, or of one dropped since, keeps them.
//
// delta is what patch(old, fresh, wanted) changed: the objects old held under the names read again
// are those it took out of a part, or, when it left the part as it was, fresh's; so this costs
// what was read, not what old holds.
func keepsAnalyses(old, fresh *classify.CatalogueData, wanted namedReads, delta *classify.CatalogueDelta) bool {
	if len(wanted.relations) == 0 && len(wanted.types) == 0 {
		return true
	}
	// A part is read again, and replaced, for the names wanted for it only: what the patch took
	// out is what old held under them (nothing when unchanged: then fresh holds it as it was).
	all := func(string) bool { return true }
	if !unchangedIn(delta.RemovedRelations, fresh.Relations, func(r *classify.Relation) (string, string, uint32) { return r.Schema, r.Name, r.OID }, sameRelation, all) ||
		!unchangedIn(delta.RemovedViews, fresh.Views, func(v *classify.View) (string, string, uint32) { return v.Schema, v.Name, v.OID }, equal[classify.View], all) ||
		!unchangedIn(delta.RemovedTypes, fresh.Types, func(t *classify.Type) (string, string, uint32) { return t.Schema, t.Name, t.OID }, equal[classify.Type], all) {
		return false
	}
	oldTypes := delta.RemovedTypes // the types old held under the names read again
	if len(delta.RemovedTypes)+len(delta.AddedTypes) == 0 {
		oldTypes = fresh.Types
	}
	for i := range oldTypes {
		if !sameFieldCasts(old, fresh, oldTypes[i].OID, len(wanted.fieldCasts) > 0) {
			return false
		}
	}
	return plainAdditions(fresh)
}

// plainAdditions reports whether nothing read is unlogged, row-secured, a domain or in pg_catalog
// (the analysis does not record names it looked up qualified with pg_catalog).
func plainAdditions(fresh *classify.CatalogueData) bool {
	for i := range fresh.Relations {
		if fresh.Relations[i].Unlogged || fresh.Relations[i].ReadPolicy != "" || fresh.Relations[i].Schema == "pg_catalog" {
			return false
		}
	}
	for i := range fresh.Views {
		if fresh.Views[i].Schema == "pg_catalog" {
			return false
		}
	}
	for i := range fresh.Types {
		if fresh.Types[i].Kind == 'd' || fresh.Types[i].Schema == "pg_catalog" {
			return false
		}
	}
	return true
}

// unchangedIn reports whether every object of old whose name named selects is in fresh with the
// same OID and the same row, or is gone (dropped) with nothing in fresh under its schema and name
// (a drop and create in place is a change).
func unchangedIn[T any](old, fresh []T, key func(*T) (schema, name string, oid uint32), same func(a, b *T) bool, named func(string) bool) bool {
	for i := range old {
		schema, name, oid := key(&old[i])
		if !named(name) {
			continue
		}
		for j := range fresh {
			freshSchema, freshName, freshOID := key(&fresh[j])
			if freshOID == oid && !same(&fresh[j], &old[i]) || freshOID != oid && freshSchema == schema && freshName == name {
				return false
			}
		}
	}
	return true
}

// equal reports whether two rows of a comparable type are the same.
func equal[T comparable](a, b *T) bool { return *a == *b }

// sameRelation reports whether two rows of pg_class, as read, are the same.
func sameRelation(a, b *classify.Relation) bool {
	return a.Schema == b.Schema && a.Name == b.Name && a.Kind == b.Kind && a.Unlogged == b.Unlogged && a.OID == b.OID &&
		a.ReadPolicy == b.ReadPolicy && a.WriteRuns == b.WriteRuns && a.WriteRule == b.WriteRule && slices.Equal(a.Reaches, b.Reaches)
}

// sameFieldCasts reports whether composite type oid has the same fields that casts convert in
// fresh as in old; when fresh did not read them (read false) they are not replaced, so they are.
func sameFieldCasts(old, fresh *classify.CatalogueData, oid uint32, read bool) bool {
	if !read {
		return true
	}
	of := func(list []classify.FieldCast) []classify.FieldCast {
		var out []classify.FieldCast
		for _, fc := range list {
			if fc.Composite == oid {
				out = append(out, fc)
			}
		}
		slices.SortFunc(out, func(a, b classify.FieldCast) int { return cmp.Compare(a.Target, b.Target) })
		return out
	}
	return slices.Equal(of(old.FieldCasts), of(fresh.FieldCasts))
}

// nameSet returns whether a name is one of names. A change names a few: comparing them costs
// less than hashing, and patch asks for every object of a part.
func nameSet(names []string) func(string) bool {
	if len(names) <= 8 {
		return func(name string) bool { return slices.Contains(names, name) }
	}
	m := make(map[string]bool, len(names))
	for _, name := range names {
		m[name] = true
	}
	return func(name string) bool { return m[name] }
}

// dropNamed returns a drop for replace that selects the objects whose name named reports, or nil
// when named is nil.
func dropNamed[T any](named func(string) bool, name func(*T) string) func(*T) bool {
	if named == nil {
		return nil
	}
	return func(v *T) bool { return named(name(v)) }
}

// orReadAgain widens drop (nil: none) to the objects of held that fresh holds again by OID: an
// object read under a name the catalogue holds it under no more (ALTER ... RENAME, made past pgowl
// and read by its new name alone) leaves no entry under the old name, which would hide what the
// name means now (a namesake later on the search path). held is ordered by OID, as the catalogue
// keeps it: an object fresh holds with a higher OID than every held one is new, and needs no look.
func orReadAgain[T any](drop func(*T) bool, held, fresh []T, oid func(*T) uint32) func(*T) bool {
	if len(held) == 0 {
		return drop
	}
	last := oid(&held[len(held)-1])
	var again map[uint32]bool
	for i := range fresh {
		if o := oid(&fresh[i]); o <= last {
			if again == nil {
				again = map[uint32]bool{}
			}
			again[o] = true
		}
	}
	if again == nil {
		return drop
	}
	return func(v *T) bool { return again[oid(v)] || drop != nil && drop(v) }
}

// names are every name wanted reads again.
func (w namedReads) names() []string {
	out := make([]string, 0, len(w.functions)+len(w.relations)+len(w.types))
	out = append(out, w.functions...)
	out = append(out, w.relations...)
	return append(out, w.types...)
}

// patch returns the data of oldCatalogue with the objects wanted names replaced by fresh's, and
// what that changed, to derive the next catalogue from (classify.DeriveCatalogue). old is not
// modified; parts that did not change share old's slices, and objects added after all held are
// appended in place when old's slice has room nobody took (Catalogue.AppendedFunctions...).
func patch(oldCatalogue *classify.Catalogue, fresh *classify.CatalogueData, wanted namedReads) (*classify.CatalogueData, *classify.CatalogueDelta) {
	old := oldCatalogue.Data()
	set := nameSet
	delta := &classify.CatalogueDelta{}
	parts := &delta.Parts
	data := *old
	data.LoadedAt = time.Now()
	if len(fresh.Warnings) > 0 {
		data.Warnings = append(slices.Clone(old.Warnings), fresh.Warnings...)
		parts.Functions = true
	}
	if wanted.schemas && fresh.Schemas != nil && !slices.Equal(old.Schemas, fresh.Schemas) {
		data.Schemas, parts.Schemas = fresh.Schemas, true
	}
	byOID := func(a, b uint32) int { return cmp.Compare(a, b) }
	// held returns a drop for replace that selects the objects of the wanted names of a part, or
	// nil when the old catalogue holds none of them (replace then need not look).
	held := func(part classify.NamedPart, names []string) func(string) bool {
		if !oldCatalogue.HoldsAnyNamed(part, names) {
			return nil
		}
		return set(names)
	}
	if len(wanted.functions) > 0 {
		drop := orReadAgain(dropNamed(held(classify.FunctionNames, wanted.functions), func(f *classify.Function) string { return f.Name }),
			old.Functions, fresh.Functions, func(f *classify.Function) uint32 { return f.OID })
		var changed bool
		data.Functions, delta.RemovedFunctions, delta.AddedFunctions, changed = replace(old.Functions, fresh.Functions, drop,
			func(a, b *classify.Function) int { return byOID(a.OID, b.OID) }, oldCatalogue.AppendedFunctions)
		parts.Functions = parts.Functions || changed
	}
	if len(wanted.relations) > 0 {
		var views, rels bool
		data.Views, delta.RemovedViews, delta.AddedViews, views = replace(old.Views, fresh.Views,
			orReadAgain(dropNamed(held(classify.ViewNames, wanted.relations), func(v *classify.View) string { return v.Name }),
				old.Views, fresh.Views, func(v *classify.View) uint32 { return v.OID }),
			func(a, b *classify.View) int { return byOID(a.OID, b.OID) }, oldCatalogue.AppendedViews)
		data.Relations, delta.RemovedRelations, delta.AddedRelations, rels = replace(old.Relations, fresh.Relations,
			orReadAgain(dropNamed(held(classify.RelationNames, wanted.relations), func(r *classify.Relation) string { return r.Name }),
				old.Relations, fresh.Relations, func(r *classify.Relation) uint32 { return r.OID }),
			func(a, b *classify.Relation) int { return byOID(a.OID, b.OID) }, oldCatalogue.AppendedRelations)
		parts.Relations = views || rels
	}
	if len(wanted.types) > 0 {
		replacedTypes := map[uint32]bool{}
		var dropType func(*classify.Type) bool
		if types := held(classify.TypeNames, wanted.types); types != nil {
			dropType = func(t *classify.Type) bool {
				if types(t.Name) {
					replacedTypes[t.OID] = true
					return true
				}
				return false
			}
		}
		data.Types, delta.RemovedTypes, delta.AddedTypes, parts.Types = replace(old.Types, fresh.Types,
			orReadAgain(dropType, old.Types, fresh.Types, func(t *classify.Type) uint32 { return t.OID }),
			func(a, b *classify.Type) int { return byOID(a.OID, b.OID) }, oldCatalogue.AppendedTypes)
		if len(wanted.fieldCasts) > 0 {
			for _, t := range fresh.Types {
				replacedTypes[t.OID] = true
			}
			var dropFieldCast func(*classify.FieldCast) bool
			for oid := range replacedTypes {
				if oldCatalogue.HasFieldCasts(oid) {
					dropFieldCast = func(fc *classify.FieldCast) bool { return replacedTypes[fc.Composite] }
					break
				}
			}
			var changed bool
			data.FieldCasts, delta.RemovedFieldCasts, delta.AddedFieldCasts, changed = replace(old.FieldCasts, fresh.FieldCasts,
				dropFieldCast,
				func(a, b *classify.FieldCast) int {
					if c := byOID(a.Composite, b.Composite); c != 0 {
						return c
					}
					return byOID(a.Target, b.Target)
				}, oldCatalogue.AppendedFieldCasts)
			parts.Types = parts.Types || changed
		}
	}
	return &data, delta
}

// replace returns list (sorted by order) without the elements drop selects and with fresh merged
// in, sorted by order; the elements it took out and those it put in (sorted, a copy of fresh's);
// and whether the result differs from list (when not, list itself, and nothing taken out or put
// in). A nil drop selects nothing, without a look through list. A read after every change calls it for every part the change names, so list is only
// copied, once, when the result differs, or not at all when fresh only adds objects after all
// list holds: appended(fresh) returns list with them after it, in place when it may.
func replace[T any](list, fresh []T, drop func(*T) bool, order func(a, b *T) int, appended func([]T) []T) (out, removed, added []T, changed bool) {
	var droppedAt []int
	var dropped []T
	if drop != nil {
		for i := range list {
			if drop(&list[i]) {
				droppedAt = append(droppedAt, i)
				dropped = append(dropped, list[i])
			}
		}
	}
	if len(fresh) == 0 && len(dropped) == 0 {
		return list, nil, nil, false
	}
	fresh = slices.Clone(fresh)
	slices.SortFunc(fresh, func(a, b T) int { return order(&a, &b) })
	slices.SortFunc(dropped, func(a, b T) int { return order(&a, &b) })
	changed = len(fresh) != len(dropped) || (len(fresh) > 0 && !reflect.DeepEqual(fresh, dropped))
	if !changed {
		return list, nil, nil, false
	}
	if len(dropped) == 0 && (len(list) == 0 || order(&list[len(list)-1], &fresh[0]) < 0) {
		// Objects added after all held (new OIDs are mostly the highest).
		return appended(fresh), dropped, fresh, true
	}
	out = make([]T, 0, len(list)-len(dropped)+len(fresh))
	j, next := 0, 0
	for i := range list {
		if next < len(droppedAt) && droppedAt[next] == i {
			next++
			continue
		}
		for j < len(fresh) && order(&fresh[j], &list[i]) < 0 {
			out = append(out, fresh[j])
			j++
		}
		out = append(out, list[i])
	}
	return append(out, fresh[j:]...), dropped, fresh, true
}
