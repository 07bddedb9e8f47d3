package catalog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/cluster"
)

// BenchmarkLoad measures what loading a catalogue costs against a real server with 200 user
// functions: a whole load over a new connection, and one over a kept connection.
func BenchmarkLoad(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	primary := cluster.StartForTest(b, cluster.Options{}).Nodes[0]
	conn, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i := 0; i < 200; i++ {
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE FUNCTION f_%d(x int) RETURNS int LANGUAGE sql AS $$ SELECT x + %d $$", i, i)); err != nil {
			b.Fatal(err)
		}
		if i%4 == 0 {
			if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TYPE t_%d AS (a int); CREATE VIEW v_%d AS SELECT f_%d(1)", i, i, i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("new connection", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := catalog.Load(ctx, c, "postgres", catalog.Overrides{}); err != nil {
				b.Fatal(err)
			}
			c.Close(ctx)
		}
	})
	b.Run("kept connection", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := catalog.Load(ctx, conn, "postgres", catalog.Overrides{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
