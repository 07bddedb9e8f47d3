package catalog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/cluster"
)

// BenchmarkLoadManyTables measures a whole catalogue read over a kept connection on a schema
// shaped as applications' are: 1000 tables, each with a serial key, a now() default, a CHECK, a
// foreign key to the previous table and an updated_at trigger (the parts the catalogue reads for
// what a write runs beside it: defaults, checks, triggers, referencing tables). It reports the
// read's time per load; compare two builds by running it at each.
func BenchmarkLoadManyTables(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	primary := cluster.StartForTest(b, cluster.Options{}).Nodes[0]
	conn, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN NEW.updated_at := now(); RETURN NEW; END $$`); err != nil {
		b.Fatal(err)
	}
	const tables = 1000
	var script strings.Builder
	for i := 0; i < tables; i++ {
		ref := ""
		if i > 0 {
			ref = fmt.Sprintf(", parent bigint REFERENCES t_%d(id)", i-1)
		}
		fmt.Fprintf(&script, `CREATE TABLE t_%d (id bigserial PRIMARY KEY, qty int CHECK (qty >= 0),
			updated_at timestamptz NOT NULL DEFAULT now()%s);
			CREATE TRIGGER t_%d_touch BEFORE UPDATE ON t_%d FOR EACH ROW EXECUTE FUNCTION touch();
			`, i, ref, i, i)
		if i%100 == 99 {
			if _, err := conn.Exec(ctx, script.String()); err != nil {
				b.Fatal(err)
			}
			script.Reset()
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := catalog.Load(ctx, conn, "postgres", catalog.Overrides{}); err != nil {
			b.Fatal(err)
		}
	}
}
