package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// A write through a view of a view is classified (and memoised, and cached) while
// the table under them runs nothing; then a trigger that sets a setting is made on that table,
// through pgowl (the Manager told of the change) and past it (found by the change poll). The
// next classification of the same write must carry the trigger's session effect: no memoised
// analysis or cached verdict may keep the old one.
func TestATriggerAddedUnderAViewChangesWhatAWriteOfTheViewRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, `
CREATE FUNCTION public.late_trg() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN PERFORM set_config('late.x', 'trg', false); RETURN NEW; END $f$;
CREATE TABLE late_base (id int);
CREATE VIEW late_view AS SELECT id FROM late_base;
CREATE VIEW late_view2 AS SELECT id FROM late_view;
CREATE TABLE past_base (id int);
CREATE VIEW past_view AS SELECT id FROM past_base;
CREATE VIEW past_view2 AS SELECT id FROM past_view;
`)
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second,
		ChangePollInterval: 50 * time.Millisecond, ChangePollsWhileUnused: time.Minute})
	cached := classify.New(classify.Options{Catalogues: m})
	uncached := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	session := &classify.Context{Database: "app", User: "postgres"}
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	const write, pastWrite = "INSERT INTO late_view2 VALUES (1)", "UPDATE past_view2 SET id = id"
	for _, c := range []*classify.Classifier{cached, uncached} {
		for _, sql := range []string{write, pastWrite} {
			if got := c.ClassifyIn(sql, session); got.Session != 0 {
				t.Fatalf("%s before any trigger: %v", sql, got.Session)
			}
		}
	}
	// Through pgowl: the proxy tells the Manager of what the statement changes.
	ddl := "CREATE TRIGGER t BEFORE INSERT ON late_base FOR EACH ROW EXECUTE FUNCTION public.late_trg()"
	effects := cached.ClassifyIn(ddl, session)
	exec(db, ddl)
	if effects.CatalogueChanges == nil {
		t.Fatalf("%s: no catalogue change", ddl)
	}
	m.Changed("app", effects.CatalogueChanges, true)
	for name, c := range map[string]*classify.Classifier{"cached": cached, "uncached": uncached} {
		if got := c.ClassifyIn(write, session); got.Session&classify.SessionSet == 0 {
			t.Errorf("%s (%s), after %s through pgowl: session %v; want SET", write, name, ddl, got.Session)
		}
	}
	// Past pgowl: the change poll finds it.
	exec(db, "CREATE TRIGGER t BEFORE UPDATE ON past_base FOR EACH ROW EXECUTE FUNCTION public.late_trg()")
	for name, c := range map[string]*classify.Classifier{"cached": cached, "uncached": uncached} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := c.ClassifyIn(pastWrite, session)
			if got.Session&classify.SessionSet != 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s (%s), 5 s after a trigger made past pgowl on the table under the views: session %v; want SET", pastWrite, name, got.Session)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
