package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/internal/cluster"
)

// primaryWithFunctions starts a throw-away primary for b and returns it with a connection to its
// postgres database (closed when b ends) that created SQL functions named prefix_0,
// prefix_1, ... (x int) RETURNS int: the user catalogue the benchmarks measure against.
func primaryWithFunctions(b *testing.B, ctx context.Context, prefix string, functions int) (*cluster.Node, *pgx.Conn) {
	b.Helper()
	primary := cluster.StartForTest(b, cluster.Options{}).Nodes[0]
	conn, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	for i := 0; i < functions; i++ {
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE FUNCTION %s_%d(x int) RETURNS int LANGUAGE sql AS $$ SELECT x + %d $$", prefix, i, i)); err != nil {
			b.Fatal(err)
		}
	}
	return primary, conn
}

// startPrimaryForTest starts a throw-away PostgreSQL primary for t, stopped when t ends, and a
// context bounded by timeout; it skips t under -short.
func startPrimaryForTest(t *testing.T, timeout time.Duration) (*cluster.Node, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return cluster.StartForTest(t, cluster.Options{}).Nodes[0], ctx
}

// connectForTest connects to primary's postgres database as its superuser, for t; the connection
// is closed when t (or the subtest it is) ends.
func connectForTest(t *testing.T, ctx context.Context, primary *cluster.Node) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
