package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// TestAViewLeftOutOfAReadByNameIsNotTakenForAPlainTable: a read by name of a view (after a change told of it)
// runs while the table under it is held ACCESS EXCLUSIVE past every retry, so the view is left
// out. Until the view is read again, a SELECT of it (it calls a writing function) must not be a
// read. Once the lock is gone it is still not read again (a known gap, reported by the log).
func TestAViewLeftOutOfAReadByNameIsNotTakenForAPlainTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, admin := startPrimary(t, ctx)
	for _, sql := range []string{
		"CREATE TABLE audit (msg text)",
		"CREATE TABLE base (n int)",
		"CREATE FUNCTION log_it() RETURNS int LANGUAGE sql AS $$ INSERT INTO audit VALUES ('x') RETURNING 1 $$",
		"CREATE VIEW writes_view AS SELECT n, log_it() AS logged FROM base",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	m := catalog.New(catalog.Options{
		Connect: func(ctx context.Context, database string) (*pgx.Conn, error) {
			config, err := pgx.ParseConfig(primary.DatabaseDSN(database))
			if err != nil {
				return nil, err
			}
			config.RuntimeParams["deadlock_timeout"] = "20ms" // lock_timeout 10 ms: retries take 0.5 s
			return pgx.ConnectConfig(ctx, config)
		},
		Wait: 20 * time.Second,
	})
	defer m.Close()
	classifier := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	session := &classify.Context{Database: "postgres", User: "postgres"}
	const sql = "SELECT * FROM writes_view"
	if got := classifier.ClassifyIn(sql, session); got.Access != classify.Write {
		t.Fatalf("before the lock: %v %v (%s), want a write", got.Access, got.Reason, got.Subject)
	}

	locker, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE base IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	classifier.CatalogueChanged(session, &classify.CatalogueChanges{Relations: []string{"writes_view"}})
	got := classifier.ClassifyIn(sql, session)
	t.Logf("warnings: %q", m.Loaded("postgres").Warnings())
	if got.Access != classify.Write {
		t.Errorf("with the view left out of the read by name: %v %v (%s), want a write (or unknown)", got.Access, got.Reason, got.Subject)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	got = classifier.ClassifyIn(sql, session)
	if got.Access != classify.Write {
		t.Errorf("after the lock is gone: %v %v (%s), want a write", got.Access, got.Reason, got.Subject)
	}
	if got.Reason == classify.ReasonUnknownEffect {
		// Known gap: nothing reads a left-out name again but a change of it or the next whole
		// read; until then the view's uses go to the primary as unknown (safe, not precise).
		t.Logf("known gap: after the lock is gone the view is still not read again: %v %v (%s)", got.Access, got.Reason, got.Subject)
	}
}
