package catalog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestASchemaASessionMadeThenRenamedPastPgowlMovesItsObjects: a session of this pgowl makes a
// schema and a function in it (both told, taken in), and, before the next poll, the schema is
// renamed on the primary itself. The poll finds one schema row under a name not known, and the
// count of schemas grew by one (the session's creation): it must still not take that for a
// schema only made, since the rename moved the function the catalogue holds under the old name.
// An unqualified call along the renamed schema then resolves to its function, which writes, not
// to public's namesake, which reads. The same holds when the session makes another object after
// the rename (its read by name reads the list of schemas again, so the old name leaves that list
// while the function stays held under it), and when a new schema is made under the old name past
// pgowl (the old name is then among the rows the poll finds, but it is another schema).
func TestASchemaASessionMadeThenRenamedPastPgowlMovesItsObjects(t *testing.T) {
	for _, after := range []renamedSchemaThen{renamedOnly, thenReadByName, thenMadeAgain} {
		t.Run(after.String(), func(t *testing.T) { schemaMadeThenRenamedPastPgowl(t, after) })
	}
}

// renamedSchemaThen is what follows the rename in schemaMadeThenRenamedPastPgowl.
type renamedSchemaThen int

const (
	renamedOnly    renamedSchemaThen = iota
	thenReadByName                   // the session makes another object, read by name
	thenMadeAgain                    // a schema is made past pgowl under the old name
)

func (r renamedSchemaThen) String() string {
	return [...]string{"renamed before the next poll", "renamed, then a read by name of another object", "renamed, then made again under the old name"}[r]
}

func schemaMadeThenRenamedPastPgowl(t *testing.T, after renamedSchemaThen) {
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
	// Through pgowl: the proxy tells the Manager of each change once committed.
	through := func(ddl string) {
		t.Helper()
		effects := c.ClassifyIn(ddl, &classify.Context{Database: "app", User: "postgres"})
		exec(db, ddl)
		m.Changed("app", effects.CatalogueChanges, true)
		if m.Catalogue("app") == nil {
			t.Fatal("no catalogue of app")
		}
	}

	// The sequence must fall between two polls: it starts right after one (its marker found) and
	// is tried again, after the next one, when it took too long.
	for attempt := 1; ; attempt++ {
		marker := fmt.Sprintf("marker_%d", attempt)
		exec(db, "CREATE FUNCTION "+marker+"() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
		waitUntil(t, 10*time.Second, marker+"() found by a poll", func() string { return "" }, func() bool { return heldSource(m, "app", marker) != "" })
		started := time.Now()
		through("CREATE SCHEMA s")
		through("CREATE FUNCTION s.f() RETURNS int LANGUAGE sql AS $$ INSERT INTO public.audit VALUES (1) RETURNING 1 $$")
		exec(db, "ALTER SCHEMA s RENAME TO s2") // past pgowl, before the next poll
		switch after {
		case thenReadByName:
			through("CREATE FUNCTION public.h() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$")
		case thenMadeAgain:
			exec(db, "CREATE SCHEMA s")
		}
		if took := time.Since(started); took <= poll/2 {
			break
		} else if attempt == 3 {
			t.Fatalf("the sequence took %s, more than half the poll interval (%s), three times", took, poll)
		}
		exec(db, "DROP SCHEMA s2 CASCADE")
		switch after {
		case thenReadByName:
			exec(db, "DROP FUNCTION public.h()")
		case thenMadeAgain:
			exec(db, "DROP SCHEMA s")
		}
		time.Sleep(2 * poll) // the polls read the drops
	}

	time.Sleep(3 * poll) // the polls find the rename
	var schemas []string
	for _, f := range m.Catalogue("app").Data().Functions {
		if f.Name == "f" {
			schemas = append(schemas, f.Schema)
		}
	}
	if got := c.ClassifyIn("SELECT f()", session); got.Access != classify.Write {
		t.Errorf("SELECT f() along s2, public after s was renamed s2 (%s): %v; want a write (s2.f inserts); catalogue holds f in %v, schemas %v",
			after, got.Access, schemas, m.Catalogue("app").Data().Schemas)
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "rows written past pgowl") || strings.Contains(line, "function catalogue read") {
				t.Log(line)
			}
		}
	}
}
