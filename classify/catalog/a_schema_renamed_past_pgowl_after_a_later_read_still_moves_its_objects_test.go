package catalog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestASchemaRenamedPastPgowlAfterALaterReadStillMovesItsObjects: a session makes schema s and
// s.f through pgowl (told, held), s is renamed s2 on the primary itself, and then the session
// makes another object (told): its read by name reads the list of schemas again, so s leaves that
// list while s.f stays held under s. The next poll finds one schema row, s2, the count grew by
// one, and every schema in the held list is known or s2: it must still not be taken for a schema
// only made, since f is held under a schema that is gone.
func TestASchemaRenamedPastPgowlAfterALaterReadStillMovesItsObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE TABLE audit (x int)")
	exec(db, "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")

	var logs syncbuf.Buffer
	const poll = 3 * time.Second
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, ChangePollsWhileUnused: time.Hour, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer m.Close()
	c := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	session := &classify.Context{Database: "app", User: "postgres", SearchPath: []string{"s2", "public"}}

	exec(db, "CREATE FUNCTION marker() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	waitUntil(t, 10*time.Second, "marker() found by a poll", func() string { return "" }, func() bool { return heldSource(m, "app", "marker") != "" })
	started := time.Now()

	through := func(ddl string) {
		effects := c.ClassifyIn(ddl, &classify.Context{Database: "app", User: "postgres"})
		exec(db, ddl)
		m.Changed("app", effects.CatalogueChanges, true)
		if m.Catalogue("app") == nil {
			t.Fatal("no catalogue of app")
		}
	}
	through("CREATE SCHEMA s")
	through("CREATE FUNCTION s.f() RETURNS int LANGUAGE sql AS $$ INSERT INTO public.audit VALUES (1) RETURNING 1 $$")
	exec(db, "ALTER SCHEMA s RENAME TO s2") // past pgowl
	through("CREATE FUNCTION public.h() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	if time.Since(started) > poll/2 {
		t.Skip("the sequence did not fall between two polls")
	}
	var schemas []string
	for _, f := range m.Catalogue("app").Data().Functions {
		if f.Name == "f" {
			schemas = append(schemas, f.Schema)
		}
	}
	t.Logf("before the poll: f held in %v, schemas %v", schemas, m.Catalogue("app").Data().Schemas)

	time.Sleep(3 * poll)
	schemas = nil
	for _, f := range m.Catalogue("app").Data().Functions {
		if f.Name == "f" {
			schemas = append(schemas, f.Schema)
		}
	}
	if got := c.ClassifyIn("SELECT f()", session); got.Access != classify.Write {
		t.Errorf("SELECT f() along s2, public after s was renamed s2: %v; want a write (s2.f inserts); catalogue holds f in %v, schemas %v",
			got.Access, schemas, m.Catalogue("app").Data().Schemas)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "rows written past pgowl") || strings.Contains(line, "function catalogue read") {
			t.Log(line)
		}
	}
}
