package catalog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify/internal/pgcluster"
)

// startPrimary starts a throw-away PostgreSQL primary for t, stopped when t ends, and an admin
// connection to its postgres database, closed when t ends. It skips t under -short or when the
// PostgreSQL binaries are missing.
func startPrimary(t *testing.T, ctx context.Context) (*pgcluster.Cluster, *pgx.Conn) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
	if errors.Is(err, pgcluster.ErrUnavailable) {
		t.Skipf("PostgreSQL not available: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	admin, err := pgx.Connect(ctx, cluster.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	return cluster, admin
}
