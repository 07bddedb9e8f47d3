package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
)

// BenchmarkSessionReadCost measures, on a real server, what a session's read adds behind the
// statements of integration/migrationbench that change the catalogue: each change is sent alone,
// then (on the next object) with its read in the same write, and the time until the last
// ReadyForQuery is compared. µs/read is what the read adds to the round trip (the node's work and
// the reply); µs/patch is ChangedAndRead's.
func BenchmarkSessionReadCost(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	primary, session := primaryWithFunctions(b, ctx, "base", 200)
	m := New(Options{Logger: zerolog.Nop(), Connect: func(ctx context.Context, database string) (*pgx.Conn, error) {
		return pgx.Connect(ctx, primary.DatabaseDSN(database))
	}})
	classifier := classify.New(classify.Options{Catalogues: m})
	ctxOf := &classify.Context{Database: "postgres", User: "postgres", SearchPath: []string{"public"}}
	classifier.ClassifyIn("SELECT base_1(1)", ctxOf)
	raw := session.PgConn()
	prepared := map[string]struct{}{}
	kinds := []struct {
		name   string
		create func(n int) string
	}{
		{"function", func(n int) string {
			return fmt.Sprintf("CREATE FUNCTION g_%d(x integer) RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN x + %d; END $$", n, n)
		}},
		{"type", func(n int) string { return fmt.Sprintf("CREATE TYPE t_%d AS (a integer, b text)", n) }},
		{"view", func(n int) string {
			return fmt.Sprintf("CREATE VIEW v_%d AS SELECT g, base_1(g) AS y FROM generate_series(1, 3) AS g", n)
		}},
	}
	object := 0
	for _, kind := range kinds {
		b.Run(kind.name, func(b *testing.B) {
			var alone, withRead, patching time.Duration
			for i := 0; i < b.N; i++ {
				for _, read := range []bool{false, true} {
					object++
					sql := kind.create(object)
					effects := classifier.ClassifyIn(sql, ctxOf)
					out, err := (&pgproto3.Query{String: sql}).Encode(nil)
					if err != nil {
						b.Fatal(err)
					}
					var r *SessionRead
					if read {
						if r = m.PrepareSessionRead("postgres", effects.CatalogueChanges); r == nil {
							b.Fatalf("%s: no session read", sql)
						}
						out = append(out, r.Messages(prepared)...)
					}
					started := time.Now()
					if _, err := raw.Conn().Write(out); err != nil {
						b.Fatal(err)
					}
					receive(b, ctx, raw, nil)
					if !read {
						alone += time.Since(started)
						m.Changed("postgres", effects.CatalogueChanges, true)
						m.Catalogue("postgres") // read by the manager, outside the timing
						continue
					}
					receive(b, ctx, raw, r)
					withRead += time.Since(started)
					started = time.Now()
					if !m.ChangedAndRead("postgres", effects.CatalogueChanges, r) {
						b.Fatalf("%s: the read was not used (%v)", sql, r.Err())
					}
					patching += time.Since(started)
				}
			}
			b.ReportMetric(float64(alone.Microseconds())/float64(b.N), "µs/change")
			b.ReportMetric(float64((withRead-alone).Microseconds())/float64(b.N), "µs/read")
			b.ReportMetric(float64(patching.Microseconds())/float64(b.N), "µs/patch")
		})
	}
}
