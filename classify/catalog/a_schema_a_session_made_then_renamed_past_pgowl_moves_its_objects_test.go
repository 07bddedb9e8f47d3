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

// TestASchemaASessionMadeThenRenamedPastPgowlMovesItsObjects: a session of this pgowl makes a
// schema and a function in it (both told), and, before the next poll, the schema is renamed on
// the primary itself. The poll finds one schema row under a name not held, and the count of
// schemas grew by one (the session's creation): it must still not take that for a schema only
// made, since the rename moved the function the catalogue holds under the old name. An
// unqualified call along the renamed schema then resolves to its function, which writes, not to
// public's namesake, which reads.
func TestASchemaASessionMadeThenRenamedPastPgowlMovesItsObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE TABLE audit (x int)")
	exec(db, "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")

	var logs syncbuf.Buffer
	const poll = 3 * time.Second // long enough for the sequence below to fall between two polls
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, ChangePollsWhileUnused: time.Hour, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer m.Close()
	c := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	session := &classify.Context{Database: "app", User: "postgres", SearchPath: []string{"s2", "public"}}
	if got := c.ClassifyIn("SELECT f()", session); got.Access != classify.Read {
		t.Fatalf("SELECT f() before: %v; want a read (public.f)", got.Access)
	}

	// A poll has just run: the next is a whole interval away.
	exec(db, "CREATE FUNCTION marker() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
	waitUntil(t, 10*time.Second, "marker() found by a poll", func() string { return "" }, func() bool { return heldSource(m, "app", "marker") != "" })
	started := time.Now()

	// Through pgowl: the proxy tells the Manager of each change once committed.
	for _, ddl := range []string{
		"CREATE SCHEMA s",
		"CREATE FUNCTION s.f() RETURNS int LANGUAGE sql AS $$ INSERT INTO public.audit VALUES (1) RETURNING 1 $$",
	} {
		effects := c.ClassifyIn(ddl, &classify.Context{Database: "app", User: "postgres"})
		exec(db, ddl)
		m.Changed("app", effects.CatalogueChanges, true)
		if m.Catalogue("app") == nil {
			t.Fatal("no catalogue of app")
		}
	}
	// Past pgowl, before the next poll.
	exec(db, "ALTER SCHEMA s RENAME TO s2")
	if time.Since(started) > poll/2 {
		t.Skip("the sequence did not fall between two polls")
	}

	time.Sleep(3 * poll) // the polls find the rename
	var schemas []string
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
