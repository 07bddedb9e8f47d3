package catalog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// A function whose CREATE statement says all of it is taken into the catalogue from the statement,
// without a read (Manager.ChangedAndCreated). What it takes must be what a read of the function
// gives, column for column, but for the OID of a new function: each statement below runs on a
// real server, and the function taken from it is compared with a whole read made afterwards.
func TestFunctionTakenFromItsStatementMatchesTheRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE SCHEMA billing")
	exec(db, "CREATE TABLE audit (msg text)")
	exec(db, "CREATE FUNCTION kept(x integer) RETURNS integer LANGUAGE sql AS $$ SELECT x $$")
	exec(db, "COMMENT ON FUNCTION kept(integer) IS 'pgowl:readonly'")
	exec(db, "CREATE FUNCTION billing.twin(a text) RETURNS text LANGUAGE sql AS $$ SELECT a $$")

	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second})
	classifier := classify.New(classify.Options{Catalogues: m})
	// The session's search_path is the default, "$user", public, and no schema is named after
	// the user: an unqualified name goes to public.
	session := &classify.Context{Database: "app", User: "postgres"}
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}

	type function struct{ schema, name, args string }
	for _, c := range []struct {
		sql  string
		made function
		// replaces: the function was held, and keeps its OID and comment.
		replaces bool
	}{
		{sql: "CREATE FUNCTION plain(x integer) RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN x + 1; END $$",
			made: function{"public", "plain", "integer"}},
		{sql: "CREATE FUNCTION billing.charge(amount numeric, note text, at timestamptz) RETURNS void LANGUAGE sql VOLATILE AS $$ INSERT INTO public.audit VALUES (note) $$",
			made: function{"billing", "charge", "numeric, text, timestamp with time zone"}},
		{sql: "CREATE FUNCTION rows_of(int8, character varying(10), double precision) RETURNS SETOF bigint LANGUAGE sql STABLE STRICT PARALLEL SAFE COST 10 ROWS 3 AS 'SELECT $1'",
			made: function{"public", "rows_of", "bigint, character varying, double precision"}},
		{sql: "CREATE FUNCTION \"Mixed Case\"(\"Arg\" boolean) RETURNS boolean LANGUAGE sql IMMUTABLE LEAKPROOF AS $$ SELECT $1 $$",
			made: function{"public", "Mixed Case", "boolean"}},
		{sql: "CREATE PROCEDURE billing.settle(n integer) LANGUAGE plpgsql SECURITY INVOKER AS $$ BEGIN INSERT INTO public.audit VALUES (n::text); END $$",
			made: function{"billing", "settle", "integer"}},
		{sql: "CREATE OR REPLACE FUNCTION kept(x integer) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT x * 2 $$",
			made: function{"public", "kept", "integer"}, replaces: true},
		{sql: "CREATE FUNCTION twin(a text) RETURNS text LANGUAGE sql AS $$ SELECT a || a $$",
			made: function{"public", "twin", "text"}},
		{sql: "CREATE FUNCTION trig() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
			made: function{"public", "trig", ""}},
	} {
		before := m.Loaded("app")
		var held *classify.Function
		for _, f := range before.Data().Functions {
			if f.Schema == c.made.schema && f.Name == c.made.name {
				held = &f
			}
		}
		effects := classifier.ClassifyIn(c.sql, session)
		if effects.CatalogueChanges == nil || effects.CatalogueChanges.Created == nil {
			t.Errorf("%s: no function taken from the statement (changes %+v)", c.sql, effects.CatalogueChanges)
			continue
		}
		exec(db, c.sql)
		if !m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, session) {
			t.Errorf("%s: the catalogue read the function instead of taking it", c.sql)
			continue
		}
		taken := findFunction(m.Loaded("app"), c.made.schema, c.made.name, c.made.args)
		if taken == nil {
			t.Errorf("%s: the catalogue holds no %s.%s(%s)", c.sql, c.made.schema, c.made.name, c.made.args)
			continue
		}
		read := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second}).Catalogue("app")
		want := findFunction(read, c.made.schema, c.made.name, c.made.args)
		if want == nil {
			t.Fatalf("%s: a whole read holds no %s.%s(%s)", c.sql, c.made.schema, c.made.name, c.made.args)
		}
		switch {
		case c.replaces && (held == nil || taken.OID != held.OID || taken.OID != want.OID || taken.Comment != want.Comment):
			t.Errorf("%s: replaced function has OID %d and comment %q, want %d and %q (held: %v)", c.sql, taken.OID, taken.Comment, want.OID, want.Comment, held)
		case !c.replaces && (held != nil || taken.OID < 0xFF000000):
			t.Errorf("%s: new function has OID %d, want one of pgowl's (held before: %v)", c.sql, taken.OID, held)
		}
		got := *taken
		got.OID = want.OID
		if diff := functionDiff(*want, got); diff != "" {
			t.Errorf("%s: taken from the statement, it differs from the read:\n%s", c.sql, diff)
		}
	}

	// An aggregate names its functions by OID: one made of a function taken without a read is
	// read with that function again, so that it finds it under the OID PostgreSQL gave it. Its
	// state function writes, so a call of the aggregate writes.
	step := "CREATE FUNCTION tally_step(state bigint, x integer) RETURNS bigint LANGUAGE sql AS $$ INSERT INTO audit VALUES (x::text); SELECT state + x $$"
	effects := classifier.ClassifyIn(step, session)
	exec(db, step)
	if !m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, session) {
		t.Fatalf("%s: read instead of taken", step)
	}
	aggregate := "CREATE AGGREGATE tally(integer) (SFUNC = tally_step, STYPE = bigint, INITCOND = '0')"
	effects = classifier.ClassifyIn(aggregate, session)
	exec(db, aggregate)
	m.Changed("app", effects.CatalogueChanges, true)
	if got := classifier.ClassifyIn("SELECT tally(n) FROM generate_series(1, 3) AS n", session); got.Access != classify.Write || got.Reason != classify.ReasonWritingFunction {
		t.Errorf("an aggregate whose state function was taken without a read: %v %v (%s), want a write (WRITING_FUNCTION)", got.Access, got.Reason, got.Subject)
	}
	if f := findFunction(m.Loaded("app"), "public", "tally_step", "bigint, integer"); f == nil || f.OID >= 0xFF000000 {
		t.Errorf("tally_step after the aggregate's read: %+v, want PostgreSQL's OID", f)
	}

	// Statements that do not say all of their function are read, as before.
	for _, sql := range []string{
		"CREATE FUNCTION with_default(x integer DEFAULT 1) RETURNS integer LANGUAGE sql AS $$ SELECT x $$",
		"CREATE FUNCTION with_out(x integer, OUT y integer) LANGUAGE sql AS $$ SELECT x $$",
		"CREATE FUNCTION with_table(x integer) RETURNS TABLE (y integer) LANGUAGE sql AS $$ SELECT x $$",
		"CREATE FUNCTION with_set() RETURNS integer LANGUAGE sql SET search_path = billing AS $$ SELECT 1 $$",
		"CREATE FUNCTION with_variadic(VARIADIC x integer[]) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$",
		"CREATE FUNCTION with_row(a audit) RETURNS text LANGUAGE sql AS $$ SELECT a.msg $$",
		"CREATE FUNCTION with_array(a integer[]) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$",
		"CREATE FUNCTION with_atomic() RETURNS integer LANGUAGE sql BEGIN ATOMIC SELECT 1; END",
		"CREATE FUNCTION with_return() RETURNS integer RETURN 1",
		"CREATE FUNCTION with_c() RETURNS integer LANGUAGE c AS 'abs'",
		"CREATE FUNCTION pg_temp.with_temp() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$",
	} {
		effects := classifier.ClassifyIn(sql, session)
		if effects.CatalogueChanges == nil || effects.CatalogueChanges.Created != nil {
			t.Errorf("%s: changes %+v, want the function named and read, not taken from the statement", sql, effects.CatalogueChanges)
		}
	}
}

// findFunction returns the function of cat with that schema, name and argument types, or nil.
func findFunction(cat *classify.Catalogue, schema, name, args string) *classify.Function {
	for i := range cat.Data().Functions {
		f := &cat.Data().Functions[i]
		if f.Schema == schema && f.Name == name && fmt.Sprint(joinNames(f.ArgTypeNames)) == args {
			return f
		}
	}
	return nil
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// functionDiff lists the columns in which got differs from want.
func functionDiff(want, got classify.Function) string {
	diff := ""
	note := func(column string, w, g any) {
		if fmt.Sprint(w) != fmt.Sprint(g) {
			diff += fmt.Sprintf("  %s: read %q, taken %q\n", column, fmt.Sprint(w), fmt.Sprint(g))
		}
	}
	note("Schema", want.Schema, got.Schema)
	note("Name", want.Name, got.Name)
	note("Language", want.Language, got.Language)
	note("Volatility", string(want.Volatility), string(got.Volatility))
	note("Kind", string(want.Kind), string(got.Kind))
	note("ReturnsSet", want.ReturnsSet, got.ReturnsSet)
	note("Source", want.Source, got.Source)
	note("SQLBody", want.SQLBody, got.SQLBody)
	note("ArgTypes", want.ArgTypes, got.ArgTypes)
	note("ArgTypeNames", want.ArgTypeNames, got.ArgTypeNames)
	note("ArgNames", want.ArgNames, got.ArgNames)
	note("Defaults", want.Defaults, got.Defaults)
	note("DefaultExprs", want.DefaultExprs, got.DefaultExprs)
	note("Variadic", want.Variadic, got.Variadic)
	note("Arguments", want.Arguments, got.Arguments)
	note("Result", want.Result, got.Result)
	note("Config", want.Config, got.Config)
	note("Comment", want.Comment, got.Comment)
	note("Override", want.Override, got.Override)
	note("Calls", want.Calls, got.Calls)
	if !slices.Equal(want.ArgTypes, got.ArgTypes) && diff == "" {
		diff = "  ArgTypes differ"
	}
	return diff
}
