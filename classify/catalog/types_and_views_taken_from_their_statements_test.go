package catalog_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// A composite or enum type and a view whose CREATE statement says all of them are taken into the
// catalogue from the statement (Manager.ChangedAndCreated), each statement run on a real server.
// A taken type must have the name, schema and kind a read gives, with its array type; a taken
// view must route what reads it as a whole read of the catalogue routes it. A view keeps its query
// as written: an object that would change what one of its names resolves to is read, with the
// view, instead of taken; a function that takes a taken type is read with the type.
func TestTypesAndViewsTakenFromTheirStatementsMatchTheRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE SCHEMA billing")
	exec(db, "CREATE SCHEMA early")
	exec(db, "CREATE TABLE audit (msg text)")
	exec(db, "CREATE FUNCTION pick() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT 1 $$")
	exec(db, "CREATE VIEW old_view AS SELECT msg FROM audit")

	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second})
	classifier := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	session := &classify.Context{Database: "app", User: "postgres"}
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	wholeRead := func() *classify.Catalogue {
		return catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second}).Catalogue("app")
	}
	// take runs sql on the server and tells the Manager of it as the proxy does; it reports
	// whether the object was taken from the statement.
	take := func(sql string, ctx *classify.Context) bool {
		t.Helper()
		effects := classifier.ClassifyIn(sql, ctx)
		if effects.CatalogueChanges == nil {
			t.Fatalf("%s: no catalogue change", sql)
		}
		if ctx.SearchPath != nil {
			exec(db, "SET search_path = "+strings.Join(ctx.SearchPath, ", "))
			defer exec(db, "RESET search_path")
		}
		exec(db, sql)
		if effects.CatalogueChanges.Created == nil {
			m.Changed("app", effects.CatalogueChanges, true)
			return false
		}
		return m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, ctx)
	}
	type typeRow struct {
		schema, name string
		kind         byte
	}
	typesNamed := func(cat *classify.Catalogue, names ...string) (rows []typeRow, oids []uint32) {
		for _, ty := range cat.Data().Types {
			if slices.Contains(names, ty.Name) {
				rows = append(rows, typeRow{ty.Schema, ty.Name, ty.Kind})
				oids = append(oids, ty.OID)
			}
		}
		slices.SortFunc(rows, func(a, b typeRow) int {
			if a.schema+"."+a.name < b.schema+"."+b.name {
				return -1
			}
			return 1
		})
		return rows, oids
	}

	for _, c := range []struct {
		sql   string
		names []string
	}{
		{"CREATE TYPE pair AS (a integer, b text)", []string{"pair", "_pair"}},
		{"CREATE TYPE billing.state AS ENUM ('open', 'closed')", []string{"state", "_state"}},
		{"CREATE TYPE \"Mixed Pair\" AS (x numeric)", []string{"Mixed Pair", "_Mixed Pair"}},
	} {
		if !take(c.sql, session) {
			t.Errorf("%s: read instead of taken from the statement", c.sql)
			continue
		}
		got, oids := typesNamed(m.Loaded("app"), c.names...)
		want, _ := typesNamed(wholeRead(), c.names...)
		if !slices.Equal(got, want) {
			t.Errorf("%s: taken %v, a whole read holds %v", c.sql, got, want)
		}
		for _, oid := range oids {
			if oid < 0xFF000000 {
				t.Errorf("%s: a taken type has OID %d, want one of pgowl's", c.sql, oid)
			}
		}
	}

	// Views: what reads them routes as a whole read routes it.
	exec(db, "CREATE FUNCTION bump() RETURNS integer LANGUAGE sql AS $$ INSERT INTO audit VALUES ('x'); SELECT 1 $$")
	m.Changed("app", &classify.CatalogueChanges{Functions: []string{"bump"}}, true)
	m.Catalogue("app") // the read of bump
	for _, c := range []struct {
		sql, use string
		want     classify.Reason
	}{
		{"CREATE VIEW recent AS SELECT msg FROM audit", "SELECT msg FROM recent", classify.ReasonReadOnly},
		{"CREATE VIEW bumped AS SELECT bump() AS n", "SELECT n FROM bumped", classify.ReasonWritingFunction},
		{"CREATE VIEW billing.of_views AS SELECT n FROM bumped", "SELECT n FROM billing.of_views", classify.ReasonWritingFunction},
		{"CREATE VIEW counted AS SELECT count(*) AS n FROM old_view, pg_class", "SELECT n FROM counted", classify.ReasonReadOnly},
		{"CREATE VIEW locked AS SELECT msg FROM audit FOR UPDATE", "SELECT msg FROM locked", classify.ReasonRowLock},
		{"CREATE VIEW stats AS SELECT sum(calls) AS n FROM pg_stat_user_functions", "SELECT n FROM stats", classify.ReasonNodeLocalStats},
		{"CREATE OR REPLACE VIEW recent AS SELECT msg, bump() AS n FROM audit", "SELECT msg FROM recent", classify.ReasonWritingFunction},
	} {
		var heldOID uint32
		for _, v := range m.Loaded("app").Data().Views {
			if v.Name == "recent" {
				heldOID = v.OID
			}
		}
		if !take(c.sql, session) {
			t.Errorf("%s: read instead of taken from the statement", c.sql)
			continue
		}
		got := classifier.ClassifyIn(c.use, session)
		want := classifier.ClassifyWith(c.use, session, wholeRead())
		if got.Reason != want.Reason || got.Access != want.Access || got.Reason != c.want {
			t.Errorf("%s, then %s: %v %v with the taken view, %v %v with a whole read; want %v", c.sql, c.use, got.Access, got.Reason, want.Access, want.Reason, c.want)
		}
		if c.sql[:17] == "CREATE OR REPLACE" {
			for _, v := range m.Loaded("app").Data().Views {
				if v.Name == "recent" && v.OID != heldOID {
					t.Errorf("%s: the replaced view has OID %d, want the held %d", c.sql, v.OID, heldOID)
				}
			}
		}
	}

	// A view made under search_path early, public calls public.pick (PostgreSQL binds it so). A
	// function early.pick made later takes the name along that path: it is read, with the view
	// (whose read gives pick qualified), not taken.
	early := &classify.Context{Database: "app", User: "postgres", SearchPath: []string{"early", "public"}}
	if !take("CREATE VIEW picked AS SELECT pick() AS n", early) {
		t.Fatal("picked: read instead of taken")
	}
	if take("CREATE FUNCTION early.pick() RETURNS integer LANGUAGE sql AS $$ INSERT INTO public.audit VALUES ('y'); SELECT 2 $$", early) {
		t.Errorf("early.pick, a name the unconfirmed view picked uses, was taken from its statement; want it read with the view")
	}
	if got := classifier.ClassifyIn("SELECT n FROM early.picked", early); got.Access != classify.Read {
		t.Errorf("a view bound to public.pick, after early.pick was made: %v %v (%s), want a read", got.Access, got.Reason, got.Subject)
	}
	for _, v := range m.Loaded("app").Data().Views {
		if v.Name == "picked" && (v.OID >= 0xFF000000 || v.Definition == "") {
			t.Errorf("picked after the read of pick: OID %d, definition %q; want PostgreSQL's", v.OID, v.Definition)
		}
	}

	// A function that takes a taken type is read with the type: it is found by the type's OID.
	if !take("CREATE TYPE point2 AS (x integer, y integer)", session) {
		t.Fatal("point2: read instead of taken")
	}
	take("CREATE FUNCTION norm(p point2) RETURNS integer LANGUAGE sql AS $$ INSERT INTO audit VALUES ('n'); SELECT (p).x $$", session)
	if got := classifier.ClassifyIn("SELECT norm(ROW(1, 2)::point2)", session); got.Reason != classify.ReasonWritingFunction {
		t.Errorf("a call of a function of a taken type: %v %v (%s), want WRITING_FUNCTION", got.Access, got.Reason, got.Subject)
	}
	if _, oids := typesNamed(m.Loaded("app"), "point2"); len(oids) != 1 || oids[0] >= 0xFF000000 {
		t.Errorf("point2 after the read of norm: OIDs %v, want PostgreSQL's", oids)
	}

	// Statements that do not say all of their object, or make it where no catalogue looks, are read.
	for _, sql := range []string{
		"CREATE TEMP VIEW temp_view AS SELECT 1 AS n",
		"CREATE VIEW pg_temp.temp_view2 AS SELECT 1 AS n",
		"CREATE TYPE pg_temp.temp_type AS (a integer)",
		"CREATE TYPE spans AS RANGE (subtype = integer)",
		"CREATE DOMAIN positive AS integer CHECK (VALUE > 0)",
		"CREATE MATERIALIZED VIEW frozen AS SELECT 1 AS n",
		"CREATE TYPE long_name_" + string(slices.Repeat([]byte{'x'}, 60)) + " AS (a integer)",
	} {
		effects := classifier.ClassifyIn(sql, session)
		if effects.CatalogueChanges != nil && effects.CatalogueChanges.Created != nil {
			t.Errorf("%s: taken from the statement (%T); want it read", sql, effects.CatalogueChanges.Created)
		}
	}
}
