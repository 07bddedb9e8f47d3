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

// An object taken from its statement joins the objects of the same name in other schemas; it
// does not replace them. Multi-tenant schemas, and a migration run once per schema, make the same
// names again and again: each taken type, view and function must leave the catalogue holding
// exactly what a whole read of the server holds, namesakes included. Each statement runs on a
// real server.
func TestTakenObjectsKeepTheirNamesakes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second})
	classifier := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	exec(db, "CREATE TABLE audit (msg text)")
	m.Changed("app", &classify.CatalogueChanges{Relations: []string{"audit"}}, true)
	m.Catalogue("app")

	names := []string{"pair", "_pair", "recent", "_recent"}
	held := func(cat *classify.Catalogue) (types, views []string) {
		for _, ty := range cat.Data().Types {
			if slices.Contains(names, ty.Name) {
				types = append(types, ty.Schema+"."+ty.Name)
			}
		}
		for _, v := range cat.Data().Views {
			if slices.Contains(names, v.Name) {
				views = append(views, v.Schema+"."+v.Name)
			}
		}
		slices.Sort(types)
		slices.Sort(views)
		return types, views
	}
	for i := range 3 {
		schema := fmt.Sprintf("tenant_%d", i)
		exec(db, "CREATE SCHEMA "+schema)
		m.Changed("app", &classify.CatalogueChanges{Everything: true}, true)
		m.Catalogue("app")
		session := &classify.Context{Database: "app", User: "postgres", SearchPath: []string{schema, "public"}}
		exec(db, "SET search_path = "+schema+", public")
		for _, sql := range []string{
			"CREATE TYPE pair AS (a integer, b text)",
			"CREATE VIEW recent AS SELECT msg FROM audit",
			"CREATE FUNCTION f_pair(x integer) RETURNS integer LANGUAGE sql AS $$ SELECT x $$",
		} {
			effects := classifier.ClassifyIn(sql, session)
			exec(db, sql)
			if effects.CatalogueChanges == nil || effects.CatalogueChanges.Created == nil {
				t.Fatalf("%s in %s: not an object taken from its statement", sql, schema)
			}
			if !m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, session) {
				t.Errorf("%s in %s: read instead of taken", sql, schema)
			}
		}
		exec(db, "RESET search_path")
		whole := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second}).Catalogue("app")
		gotTypes, gotViews := held(m.Loaded("app"))
		wantTypes, wantViews := held(whole)
		if !slices.Equal(gotTypes, wantTypes) || !slices.Equal(gotViews, wantViews) {
			t.Errorf("after the objects of %s were taken: types %v, views %v; a whole read holds types %v, views %v",
				schema, gotTypes, gotViews, wantTypes, wantViews)
		}
		functions := 0
		for _, f := range m.Loaded("app").Data().Functions {
			if f.Name == "f_pair" {
				functions++
			}
		}
		if functions != i+1 {
			t.Errorf("after f_pair was taken in %s: %d functions f_pair held, want %d", schema, functions, i+1)
		}
	}
}
