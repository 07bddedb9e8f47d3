package classify_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/cluster"
)

// The helpers of the tests that hold the classifier's verdicts to a real primary and hot standby.

// runOnNode runs sql on node over a connection of its own, as the superuser, and returns its error.
func runOnNode(ctx context.Context, node *cluster.Node, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, node.SuperuserDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql).ReadAll()
	return err
}

// loadCatalogueAfter runs setup on the primary, loads its catalogue and waits for the standby to
// replay it.
func loadCatalogueAfter(t *testing.T, ctx context.Context, primary, standby *cluster.Node, setup string) *classify.Catalogue {
	t.Helper()
	conn, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.PgConn().Exec(ctx, setup).ReadAll(); err != nil {
		t.Fatalf("setup: %v", err)
	}
	cat, err := catalog.Load(ctx, conn, "postgres", catalog.Overrides{})
	if err != nil {
		t.Fatalf("load catalogue: %v", err)
	}
	if err := standby.WaitCaughtUp(ctx, primary); err != nil {
		t.Fatalf("standby did not replay the setup: %v", err)
	}
	return cat
}

// startPrimaryAndStandby starts a primary and a hot standby for a test that takes PostgreSQL as
// its oracle (skipped with -short, as every test that starts servers), and returns a context
// that bounds the test.
func startPrimaryAndStandby(t *testing.T) (ctx context.Context, primary, standby *cluster.Node) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	nodes := cluster.StartForTest(t, cluster.Options{Standbys: 1}).Nodes
	return ctx, nodes[0], nodes[1]
}
