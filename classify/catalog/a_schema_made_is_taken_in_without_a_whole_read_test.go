package catalog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestASchemaMadeIsTakenInWithoutAWholeRead: a schema made, empty, past pgowl is found by the
// polls and taken into the list of schemas (where an unqualified CREATE goes) by a read of that
// list, not of the whole catalogue; so is one a session tells of, which the polls then do not
// read again. A schema renamed, or granted, past pgowl is still a change of everything: every
// name in a renamed schema moved, and a grant writes the row of a schema already known, which
// the polls cannot tell from a rename.
func TestASchemaMadeIsTakenInWithoutAWholeRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)

	var logs syncbuf.Buffer
	const poll = 50 * time.Millisecond
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, ChangePollsWhileUnused: time.Hour, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer m.Close()
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	wholeReads := func() int { return wholeReadsLogged(&logs) }
	schemas := func() []string { return m.Loaded("app").Data().Schemas }
	within := func(what string, done func() bool) {
		t.Helper()
		waitUntil(t, 5*time.Second, what, func() string { return fmt.Sprintf("schemas %v, %d whole reads", schemas(), wholeReads()) }, done)
	}
	if got := wholeReads(); got != 1 {
		t.Fatalf("%d whole reads after the first use; want 1", got)
	}

	exec(db, "CREATE SCHEMA made_past")
	within("made_past among the schemas", func() bool { return slices.Contains(schemas(), "made_past") })
	time.Sleep(4 * poll)
	if got := wholeReads(); got != 1 {
		t.Errorf("%d whole reads after a schema was made past pgowl; want 1 (the first)", got)
	}

	// A session of this pgowl makes one and tells of it, as the proxy does once it committed.
	exec(db, "CREATE SCHEMA made_through")
	m.Changed("app", &classify.CatalogueChanges{Schemas: []string{"made_through"}}, true)
	if !slices.Contains(m.Catalogue("app").Data().Schemas, "made_through") {
		t.Errorf("made_through not among the schemas once told: %v", schemas())
	}
	time.Sleep(6 * poll) // the polls find its row
	if got := wholeReads(); got != 1 {
		t.Errorf("%d whole reads after a schema a session told of; want 1 (the first)", got)
	}

	exec(db, "ALTER SCHEMA made_past RENAME TO renamed_past")
	within("a whole read for the rename, with renamed_past among the schemas", func() bool {
		return wholeReads() == 2 && slices.Contains(schemas(), "renamed_past") && !slices.Contains(schemas(), "made_past")
	})
	exec(db, "GRANT USAGE ON SCHEMA renamed_past TO PUBLIC")
	within("a whole read for the grant", func() bool { return wholeReads() == 3 })
}
