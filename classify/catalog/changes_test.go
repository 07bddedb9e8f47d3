package catalog_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// TestChangesAreReadByName: after a change it was told of, the manager reads just the changed names
// over the connection it keeps (no new connection, no whole load), the session's next statement is
// classified with the change, and while a change cannot be read, statements whose verdict does not
// depend on the catalogue do not wait for it, while those that do never get the old catalogue.
func TestChangesAreReadByName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, db := startPrimary(t, ctx)
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE audit (msg text)")
	exec("CREATE FUNCTION report() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM audit $$")

	var connects atomic.Int32
	var block atomic.Bool
	m := catalog.New(catalog.Options{
		Connect: func(ctx context.Context, database string) (*pgx.Conn, error) {
			connects.Add(1)
			if block.Load() {
				<-ctx.Done() // a primary that does not answer
				return nil, ctx.Err()
			}
			return pgx.Connect(ctx, primary.DatabaseDSN(database))
		},
		Wait:            2 * time.Second,
		LoadTimeout:     5 * time.Second,
		RefreshInterval: time.Hour,
	})
	classifier := classify.New(classify.Options{Catalogues: m})
	session := &classify.Context{Database: "postgres", User: "postgres"}
	classifyAs := func(sql string, access classify.Access, reason classify.Reason) {
		t.Helper()
		if got := classifier.ClassifyIn(sql, session); got.Access != access || got.Reason != reason {
			t.Errorf("%s: %v %v (%s), want %v %v", sql, got.Access, got.Reason, got.Subject, access, reason)
		}
	}
	// The first whole load connects too; on a loaded machine it may outlast Wait.
	for loadBy := time.Now().Add(20 * time.Second); m.Catalogue("postgres") == nil && time.Now().Before(loadBy); {
	}
	classifyAs("SELECT report()", classify.Read, classify.ReasonReadOnly)
	first := m.Loaded("postgres")
	if first == nil {
		t.Fatal("the function catalogue was not loaded within 20s")
	}

	// The session replaces report() with a writing body and creates a new function: each is
	// seen by the next statement, read by name over the kept connection.
	for _, change := range []string{
		"CREATE OR REPLACE FUNCTION report() RETURNS bigint LANGUAGE sql AS $$ DELETE FROM audit RETURNING 1::bigint $$",
		"CREATE FUNCTION fresh() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$",
	} {
		effects := classifier.ClassifyIn(change, session)
		if !effects.CatalogueChange || effects.CatalogueChanges == nil || effects.CatalogueChanges.Everything {
			t.Fatalf("%s: catalogue changes %+v, want the function named", change, effects.CatalogueChanges)
		}
		exec(change)
		classifier.CatalogueChanged(session, effects.CatalogueChanges)
	}
	classifyAs("SELECT report()", classify.Write, classify.ReasonWritingFunction)
	classifyAs("SELECT fresh()", classify.Read, classify.ReasonReadOnly)
	if n := connects.Load(); n != 1 {
		t.Errorf("reading the changes made %d connections in all, want the one kept", n)
	}
	if now := m.Loaded("postgres"); now == first || now.FunctionCount() != first.FunctionCount()+1 {
		t.Errorf("the catalogue was not patched: %d functions before, %d after", first.FunctionCount(), now.FunctionCount())
	}

	// The primary stops answering (the kept connection closes when idle, a new one hangs).
	block.Store(true)
	time.Sleep(4 * time.Second)
	exec("CREATE OR REPLACE FUNCTION fresh() RETURNS int LANGUAGE sql AS $$ INSERT INTO audit VALUES ('x') RETURNING 2 $$")
	classifier.CatalogueChanged(session, &classify.CatalogueChanges{Functions: []string{"fresh"}})
	started := time.Now()
	for _, sql := range []string{"CREATE FUNCTION later() RETURNS int LANGUAGE sql AS $$ SELECT 3 $$", "SET work_mem = '8MB'", "BEGIN", "SELECT 1"} {
		classifier.ClassifyIn(sql, session)
	}
	if waited := time.Since(started); waited > 200*time.Millisecond {
		t.Errorf("statements that need no catalogue waited %s for a pending change", waited)
	}
	// A statement that needs it waits at most Wait and is classified without a catalogue, never
	// with the held one, in which fresh() still only reads.
	started = time.Now()
	got := classifier.ClassifyIn("SELECT fresh()", session)
	if got.Access != classify.Write || got.Reason != classify.ReasonUnknownEffect {
		t.Errorf("SELECT fresh() while its change cannot be read: %v %v (%s), want write UNKNOWN_EFFECT", got.Access, got.Reason, got.Subject)
	}
	if waited := time.Since(started); waited > 4*time.Second {
		t.Errorf("SELECT fresh() waited %s, want at most about Wait (2s)", waited)
	}
}
