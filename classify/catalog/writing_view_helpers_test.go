package catalog_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/internal/cluster"
)

// writingViewRead is what the tests of a view left out of a read classify: a SELECT of a view
// whose query calls a function that writes.
const writingViewRead = "SELECT * FROM writes_view"

// startPrimaryWithAWritingView starts a primary holding writes_view, over the table base, which
// calls log_it(), a function that inserts into audit. connect opens connections whose lock
// waits are short: deadlock_timeout 20 ms makes a catalogue read's lock_timeout 10 ms, so its 50
// retries on a lock take 0.5 s.
func startPrimaryWithAWritingView(t *testing.T, ctx context.Context) (primary *cluster.Node, connect func(context.Context, string) (*pgx.Conn, error)) {
	t.Helper()
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
	connect = func(ctx context.Context, database string) (*pgx.Conn, error) {
		config, err := pgx.ParseConfig(primary.DatabaseDSN(database))
		if err != nil {
			return nil, err
		}
		config.RuntimeParams["deadlock_timeout"] = "20ms"
		return pgx.ConnectConfig(ctx, config)
	}
	return primary, connect
}

// lockTheTableUnderTheView holds base ACCESS EXCLUSIVE, as VACUUM FULL, a rewriting ALTER TABLE
// or a long migration does, until release: pg_get_viewdef of writes_view waits on it.
func lockTheTableUnderTheView(t *testing.T, ctx context.Context, primary *cluster.Node) (release func()) {
	t.Helper()
	locker, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE base IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := tx.Rollback(context.Background()); err != nil {
			t.Error(err)
		}
		locker.Close(context.Background())
	}
}
