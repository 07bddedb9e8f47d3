package catalog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// Views taken from their CREATE statements (no read of them), made under several
// search_paths over an unqualified table name that more than one schema holds, one of them with a
// trigger that sets a setting. PostgreSQL (the oracle) binds the name when the view is made; a
// write through the view, classified in a session with another search_path, must carry the
// trigger's session effect exactly when PostgreSQL's write ran it, as a whole read would.
func TestAWriteThroughATakenViewResolvesItsTableAlongTheViewsPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, `
CREATE FUNCTION public.tk_trg() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN PERFORM set_config('tk.x', TG_TABLE_SCHEMA, false); RETURN NEW; END $f$;
CREATE SCHEMA s;
CREATE SCHEMA postgres;
CREATE TABLE public.t (id int);
CREATE TABLE s.t (id int);
CREATE TRIGGER t BEFORE INSERT ON s.t FOR EACH ROW EXECUTE FUNCTION public.tk_trg();
CREATE TABLE public.u (id int);
CREATE TABLE postgres.u (id int);
CREATE TRIGGER t BEFORE INSERT ON postgres.u FOR EACH ROW EXECUTE FUNCTION public.tk_trg();
`)
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second})
	classifier := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	take := func(sql string, ctx *classify.Context) bool {
		t.Helper()
		effects := classifier.ClassifyIn(sql, ctx)
		if effects.CatalogueChanges == nil {
			t.Fatalf("%s: no catalogue change", sql)
		}
		if ctx.SearchPath != nil {
			exec(db, "SET search_path = "+strings.ReplaceAll(strings.Join(ctx.SearchPath, ", "), "$user", `"$user"`))
			defer exec(db, "RESET search_path")
		}
		exec(db, sql)
		if effects.CatalogueChanges.Created == nil {
			m.Changed("app", effects.CatalogueChanges, true)
			return false
		}
		return m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, ctx)
	}
	oracle := func(sql string) bool {
		conn, err := connect(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("oracle: %s: %v", sql, err)
		}
		var got string
		if err := conn.QueryRow(ctx, "SELECT coalesce(current_setting('tk.x', true), '')").Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got != ""
	}
	path := func(schemas ...string) *classify.Context {
		return &classify.Context{Database: "app", User: "postgres", SearchPath: schemas}
	}
	writer := path("public")
	for _, c := range []struct {
		create string
		under  *classify.Context
		write  string
	}{
		{"CREATE VIEW public.over_s AS SELECT id FROM t", path("s", "public"), "INSERT INTO public.over_s VALUES (1)"},
		{"CREATE VIEW public.over_public AS SELECT id FROM t", path("public", "s"), "INSERT INTO public.over_public VALUES (1)"},
		{"CREATE VIEW s.of_view AS SELECT id FROM over_s", path("public"), "INSERT INTO s.of_view VALUES (1)"},
		{"CREATE VIEW public.over_user AS SELECT id FROM u", path("$user", "public"), "INSERT INTO public.over_user VALUES (1)"},
		{"CREATE VIEW public.of_taken_of_taken AS SELECT id FROM s.of_view", path("public"), "INSERT INTO public.of_taken_of_taken VALUES (1)"},
	} {
		if !take(c.create, c.under) {
			t.Errorf("%s: read instead of taken", c.create)
			continue
		}
		runs := oracle(c.write)
		got := classifier.ClassifyIn(c.write, writer)
		whole := classifier.ClassifyWith(c.write, writer, catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second}).Catalogue("app"))
		counted := got.Session&classify.SessionSet != 0
		if runs && !counted {
			t.Errorf("%s (made under %v), then %s: PostgreSQL's write ran the trigger; pgowl counts %v (a whole read: %v)", c.create, c.under.SearchPath, c.write, got.Session, whole.Session)
		}
		if got.Session != whole.Session {
			t.Errorf("%s (made under %v), then %s: %v with the taken view, %v with a whole read", c.create, c.under.SearchPath, c.write, got.Session, whole.Session)
		}
		t.Logf("%s under %v: PostgreSQL ran the trigger %v; taken %v, whole %v", c.create, c.under.SearchPath, runs, got.Session, whole.Session)
	}
}
