package catalog_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/internal/cluster"
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
