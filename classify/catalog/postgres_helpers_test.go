package catalog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// startPrimary starts a throw-away PostgreSQL primary for t, stopped when t ends, and an admin
// connection to its postgres database, closed when t ends. It skips t under -short or when the
// PostgreSQL binaries are missing.
func startPrimary(t *testing.T, ctx context.Context) (*cluster.Node, *pgx.Conn) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	primary := cluster.StartForTest(t, cluster.Options{}).Nodes[0]
	admin, err := pgx.Connect(ctx, primary.SuperuserDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	return primary, admin
}

// startAppDatabase starts a primary as startPrimary does, makes a database app on it and returns
// a connection to app (closed when t ends), a Connect for catalog.Options, and exec, which runs
// a statement on a connection and fails t when it fails.
func startAppDatabase(t *testing.T, ctx context.Context) (db *pgx.Conn, connect func(context.Context, string) (*pgx.Conn, error), exec func(*pgx.Conn, string)) {
	t.Helper()
	primary, admin := startPrimary(t, ctx)
	exec = func(conn *pgx.Conn, sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(admin, "CREATE DATABASE app")
	db, err := pgx.Connect(ctx, primary.DatabaseDSN("app"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	connect = func(ctx context.Context, database string) (*pgx.Conn, error) {
		return pgx.Connect(ctx, primary.DatabaseDSN(database))
	}
	return db, connect, exec
}

// waitUntil checks done every 10 ms until it holds, and fails t once timeout has passed, saying
// what it waited for and what may tell why it did not come (context, asked then).
func waitUntil(t *testing.T, timeout time.Duration, what string, context func() string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !done(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s (%s): %s", timeout, context(), what)
		}
	}
}

// heldSource is the body of the function name in the catalogue m holds of database ("" when it
// holds none of that name).
func heldSource(m *catalog.Manager, database, name string) string {
	for _, f := range m.Loaded(database).Data().Functions {
		if f.Name == name {
			return f.Source
		}
	}
	return ""
}

// wholeReadsLogged counts the whole catalogue reads a Manager logged at debug level into logs
// (those that found the same content included).
func wholeReadsLogged(logs *syncbuf.Buffer) int {
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"whole":true`) && strings.Contains(line, "function catalogue read") {
			n++
		}
	}
	return n
}
