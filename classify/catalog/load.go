package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
)

// Overrides are the configured assertions about functions (classify.functions), each written as
// schema.name(argtypes) or name(argtypes) and resolved by the database itself (to_regprocedure).
type Overrides struct {
	Readonly []string
	Writes   []string
}

// Load reads one database's catalogue over conn: its functions (pg_proc, with bodies, argument types,
// settings and comments), views (pg_get_viewdef), relations, types and the role and database defaults
// of search_path. All of it is read in one REPEATABLE READ transaction, so it is one consistent
// snapshot. conn must be connected to database; Load leaves it idle.
func Load(ctx context.Context, conn *pgx.Conn, database string, overrides Overrides) (*classify.Catalogue, error) {
	data := classify.CatalogueData{Database: database, LoadedAt: time.Now(), DefaultSearchPath: map[string][]string{}}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("catalog: begin: %w", err)
	}
	defer tx.Rollback(context.Background())

	// The configured overrides name functions the way a client would, so they are resolved before
	// the search path is narrowed below.
	assertions := map[uint32]string{}
	for _, list := range []struct {
		kind    string
		entries []string
	}{{"readonly", overrides.Readonly}, {"writes", overrides.Writes}} {
		for _, entry := range list.entries {
			var oid *uint32
			if err := tx.QueryRow(ctx, "SELECT to_regprocedure($1)::oid", entry).Scan(&oid); err != nil {
				data.Warnings = append(data.Warnings, fmt.Sprintf("classify.functions.%s: %q: %v", list.kind, entry, err))
				continue
			}
			if oid == nil {
				data.Warnings = append(data.Warnings, fmt.Sprintf("classify.functions.%s: %q names no function in database %q", list.kind, entry, database))
				continue
			}
			if previous := assertions[*oid]; previous != "writes" {
				assertions[*oid] = list.kind
			}
		}
	}
	if err := loadDefaultSearchPaths(ctx, tx, &data); err != nil {
		return nil, err
	}
	// With only pg_catalog on the path, pg_get_viewdef and pg_get_functiondef qualify every other name.
	if _, err := tx.Exec(ctx, "SET LOCAL search_path = pg_catalog"); err != nil {
		return nil, fmt.Errorf("catalog: set search_path: %w", err)
	}
	if err := loadFunctions(ctx, tx, &data, assertions); err != nil {
		return nil, err
	}
	if err := loadViews(ctx, tx, &data); err != nil {
		return nil, err
	}
	if err := loadRelations(ctx, tx, &data); err != nil {
		return nil, err
	}
	if err := loadTypes(ctx, tx, &data); err != nil {
		return nil, err
	}
	if err := loadOperators(ctx, tx, &data); err != nil {
		return nil, err
	}
	if err := loadCasts(ctx, tx, &data); err != nil {
		return nil, err
	}
	if err := loadFieldCasts(ctx, tx, &data); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("catalog: commit: %w", err)
	}
	return classify.NewCatalogue(data), nil
}

const functionsQuery = `
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
       CASE WHEN a.aggfnoid IS NULL THEN '{}'::oid[] ELSE
         ARRAY(SELECT x FROM (VALUES (a.aggtransfn::oid), (a.aggfinalfn::oid), (a.aggcombinefn::oid),
                                     (a.aggserialfn::oid), (a.aggdeserialfn::oid), (a.aggmtransfn::oid),
                                     (a.aggminvtransfn::oid), (a.aggmfinalfn::oid)) AS v(x) WHERE x <> 0) END
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_language l ON l.oid = p.prolang
LEFT JOIN pg_description d ON d.objoid = p.oid AND d.classoid = 'pg_proc'::regclass AND d.objsubid = 0
LEFT JOIN pg_aggregate a ON a.aggfnoid = p.oid
WHERE n.nspname <> 'pg_catalog'
ORDER BY p.oid`

func loadFunctions(ctx context.Context, tx pgx.Tx, data *classify.CatalogueData, assertions map[uint32]string) error {
	rows, err := tx.Query(ctx, functionsQuery)
	if err != nil {
		return fmt.Errorf("catalog: read pg_proc: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var f classify.Function
		var volatility, kind string
		if err := rows.Scan(&f.OID, &f.Schema, &f.Name, &f.Language, &volatility, &kind, &f.ReturnsSet, &f.Source,
			&f.SQLBody, &f.ArgTypes, &f.ArgTypeNames, &f.ArgNames, &f.Defaults, &f.DefaultExprs, &f.Variadic, &f.Arguments, &f.Result,
			&f.Config, &f.Comment, &f.Calls); err != nil {
			return fmt.Errorf("catalog: read pg_proc row: %w", err)
		}
		if volatility != "" {
			f.Volatility = volatility[0]
		}
		if kind != "" {
			f.Kind = kind[0]
		}
		f.Override = assertions[f.OID]
		data.Functions = append(data.Functions, f)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("catalog: read pg_proc: %w", err)
	}
	return nil
}

func loadViews(ctx context.Context, tx pgx.Tx, data *classify.CatalogueData) (err error) {
	data.Views, err = readAll(ctx, tx, "views", `
SELECT c.oid, n.nspname, c.relname, coalesce(pg_get_viewdef(c.oid), '')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'v' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
ORDER BY c.oid`, func(row pgx.CollectableRow, v *classify.View) error {
		return row.Scan(&v.OID, &v.Schema, &v.Name, &v.Definition)
	})
	return err
}

func loadRelations(ctx context.Context, tx pgx.Tx, data *classify.CatalogueData) (err error) {
	data.Relations, err = readAll(ctx, tx, "relations", `
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
       ELSE '' END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p', 'S')
  AND n.nspname NOT LIKE 'pg\_temp\_%' AND n.nspname NOT LIKE 'pg\_toast%'
ORDER BY 1, 2`, func(row pgx.CollectableRow, r *classify.Relation) error {
		var kind string
		if err := row.Scan(&r.Schema, &r.Name, &kind, &r.Unlogged, &r.OID, &r.ReadPolicy); err != nil {
			return err
		}
		if kind != "" {
			r.Kind = kind[0]
		}
		return nil
	})
	return err
}

func loadTypes(ctx context.Context, tx pgx.Tx, data *classify.CatalogueData) (err error) {
	data.Types, err = readAll(ctx, tx, "types", `
SELECT t.oid, n.nspname, t.typname, t.typtype::text, t.typbasetype::oid,
       CASE WHEN t.typtype = 'd' THEN coalesce((
         SELECT string_agg('(' || pg_get_expr(c.conbin, 0) || ')', ', ' ORDER BY c.conname)
         FROM pg_constraint c WHERE c.contypid = t.oid AND c.contype = 'c'), '') ELSE '' END
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname NOT LIKE 'pg\_temp\_%' AND n.nspname NOT LIKE 'pg\_toast%'
ORDER BY t.oid`, func(row pgx.CollectableRow, t *classify.Type) error {
		var kind string
		if err := row.Scan(&t.OID, &t.Schema, &t.Name, &kind, &t.Base, &t.Check); err != nil {
			return err
		}
		if kind != "" {
			t.Kind = kind[0]
		}
		return nil
	})
	return err
}

// loadDefaultSearchPaths works out the search_path a new session starts with, per role: a setting for
// the role in this database, else for the role, else for this database, else the server's.
func loadDefaultSearchPaths(ctx context.Context, tx pgx.Tx, data *classify.CatalogueData) error {
	var server, source string
	if err := tx.QueryRow(ctx, "SELECT coalesce(reset_val, boot_val), source FROM pg_settings WHERE name = 'search_path'").Scan(&server, &source); err != nil {
		return fmt.Errorf("catalog: read search_path default: %w", err)
	}
	switch source {
	case "database", "user", "database user", "client", "session":
		// The loader's own value comes from a setting for its role or database: use the built-in default.
		server = `"$user", public`
	}
	rows, err := tx.Query(ctx, `
SELECT coalesce(r.rolname, ''), s.setdatabase <> 0, cfg
FROM pg_db_role_setting s
LEFT JOIN pg_roles r ON r.oid = s.setrole
CROSS JOIN LATERAL unnest(s.setconfig) AS cfg
WHERE s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
  AND cfg LIKE 'search\_path=%'`)
	if err != nil {
		return fmt.Errorf("catalog: read role and database settings: %w", err)
	}
	defer rows.Close()
	type level struct {
		value string
		rank  int
	}
	best := map[string]level{"": {server, 0}}
	for rows.Next() {
		var role, setting string
		var inDatabase bool
		if err := rows.Scan(&role, &inDatabase, &setting); err != nil {
			return fmt.Errorf("catalog: read setting row: %w", err)
		}
		value := strings.TrimPrefix(setting, "search_path=")
		rank := 1 // this database, every role
		switch {
		case role != "" && inDatabase:
			rank = 3
		case role != "":
			rank = 2
		}
		if current, ok := best[role]; !ok || rank > current.rank {
			best[role] = level{value, rank}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("catalog: read role and database settings: %w", err)
	}
	for role, l := range best {
		data.DefaultSearchPath[role] = classify.SplitSearchPath(l.value)
	}
	return nil
}

// loadOperators reads the operators outside pg_catalog: an expression such as a ### b runs the
// operator's function without naming it.
func loadOperators(ctx context.Context, tx pgx.Tx, data *classify.CatalogueData) (err error) {
	data.Operators, err = readAll(ctx, tx, "pg_operator", `
SELECT n.nspname, o.oprname, o.oprcode::oid, CASE WHEN pn.nspname = 'pg_catalog' THEN p.proname ELSE '' END,
       (SELECT x.oprcode::oid FROM pg_operator x JOIN pg_proc xp ON xp.oid = x.oprcode
         WHERE x.oid = o.oprnegate AND xp.pronamespace <> 'pg_catalog'::regnamespace),
       (SELECT x.oprcode::oid FROM pg_operator x JOIN pg_proc xp ON xp.oid = x.oprcode
         WHERE x.oid = o.oprcom AND xp.pronamespace <> 'pg_catalog'::regnamespace)
FROM pg_operator o
JOIN pg_namespace n ON n.oid = o.oprnamespace
JOIN pg_proc p ON p.oid = o.oprcode
JOIN pg_namespace pn ON pn.oid = p.pronamespace
WHERE n.nspname <> 'pg_catalog'
ORDER BY o.oid`, func(row pgx.CollectableRow, o *classify.Operator) error {
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
	})
	return err
}

// loadCasts reads the casts whose function is outside pg_catalog: x::t runs it without naming it.
func loadCasts(ctx context.Context, tx pgx.Tx, data *classify.CatalogueData) (err error) {
	data.Casts, err = readAll(ctx, tx, "pg_cast", `
SELECT c.castsource::oid, c.casttarget::oid, c.castfunc::oid
FROM pg_cast c
JOIN pg_proc p ON p.oid = c.castfunc
JOIN pg_namespace pn ON pn.oid = p.pronamespace
WHERE pn.nspname <> 'pg_catalog'
ORDER BY c.oid`, func(row pgx.CollectableRow, c *classify.Cast) error {
		return row.Scan(&c.Source, &c.Target, &c.Function)
	})
	return err
}

// loadFieldCasts reads which composite types have a field of a type that a cast of loadCasts
// converts to: ROW(...)::t may run that cast for the field.
func loadFieldCasts(ctx context.Context, tx pgx.Tx, data *classify.CatalogueData) (err error) {
	data.FieldCasts, err = readAll(ctx, tx, "composite fields", `
SELECT DISTINCT t.oid, a.atttypid
FROM pg_type t
JOIN pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
WHERE t.typtype = 'c' AND a.atttypid IN (
  SELECT c.casttarget FROM pg_cast c JOIN pg_proc p ON p.oid = c.castfunc
  WHERE p.pronamespace <> 'pg_catalog'::regnamespace)
ORDER BY 1, 2`, func(row pgx.CollectableRow, fc *classify.FieldCast) error {
		return row.Scan(&fc.Composite, &fc.Target)
	})
	return err
}

// readAll runs query in tx and scans each row into a new T; what names the rows in errors.
func readAll[T any](ctx context.Context, tx pgx.Tx, what, query string, scan func(pgx.CollectableRow, *T) error) ([]T, error) {
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("catalog: read %s: %w", what, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) {
		var v T
		err := scan(row, &v)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: read %s: %w", what, err)
	}
	return list, nil
}
