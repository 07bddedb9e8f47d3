package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/internal/cluster"
)

// BenchmarkRefresh measures reading one changed function again over a kept connection, against a
// real server with 200 user functions, and what rebuilding the catalogue around it costs.
func BenchmarkRefresh(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, conn := primaryWithFunctions(b, ctx, "f", 200)
	data, assertions, err := loadData(ctx, conn, "postgres", Overrides{})
	if err != nil {
		b.Fatal(err)
	}
	if err := prepareConnection(ctx, conn); err != nil {
		b.Fatal(err)
	}
	b.Run("read names", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := readNamesBatch(ctx, conn, namedReads{functions: []string{"f_7"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	f := filter{Names: []string{"f_7"}}
	var warnings []string
	for _, p := range []struct {
		name string
		run  func() error
	}{
		{"functions", func() error { _, err := readRows(ctx, conn, functionsPart, f, &warnings); return err }},
		{"views", func() error { _, err := readRows(ctx, conn, viewsPart, f, &warnings); return err }},
		{"relations", func() error { _, err := readRows(ctx, conn, relationsPart, f, &warnings); return err }},
		{"types", func() error { _, err := readRows(ctx, conn, typesPart, f, &warnings); return err }},
		{"field casts", func() error { _, err := readRows(ctx, conn, fieldCastsPart, f, &warnings); return err }},
	} {
		b.Run("part "+p.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := p.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	held := classify.NewCatalogue(*data)
	b.Run("refresh names", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, _, _, err := refreshNames(ctx, conn, held, &classify.CatalogueChanges{Functions: []string{"f_7"}}, assertions); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new catalogue", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			classify.NewCatalogue(*data)
		}
	})
	old := classify.NewCatalogue(*data)
	// f_7 read again and replaced by itself, as a refresh that found it changed derives.
	delta := &classify.CatalogueDelta{Parts: classify.CatalogueParts{Functions: true}}
	for _, f := range data.Functions {
		if f.Name == "f_7" {
			delta.RemovedFunctions = append(delta.RemovedFunctions, f)
			delta.AddedFunctions = append(delta.AddedFunctions, f)
		}
	}
	b.Run("derive catalogue", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			classify.DeriveCatalogue(old, *data, delta)
		}
	})
}

// BenchmarkChangeThenUse measures what classifying a statement that uses a function costs right
// after the statement that created it ran: the refresh of the function and its analysis.
func BenchmarkChangeThenUse(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	primary := cluster.StartForTest(b, cluster.Options{}).Nodes[0]
	conn, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	m := New(Options{Connect: func(ctx context.Context, database string) (*pgx.Conn, error) {
		return pgx.Connect(ctx, primary.DatabaseDSN(database))
	}})
	classifier := classify.New(classify.Options{Catalogues: m})
	session := &classify.Context{Database: "postgres", User: "postgres"}
	classifier.ClassifyIn("SELECT 1 FROM pg_class", session)
	var changeTime, useTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		create := fmt.Sprintf("CREATE FUNCTION g_%d(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN x + %d; END $$", i, i)
		started := time.Now()
		classifier.ClassifyIn(create, session)
		changeTime += time.Since(started)
		b.StopTimer()
		if _, err := conn.Exec(ctx, create); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		started = time.Now()
		classifier.CatalogueChanged(session, &classify.CatalogueChanges{Functions: []string{fmt.Sprintf("g_%d", i)}})
		if got := classifier.ClassifyIn(fmt.Sprintf("SELECT g_%d(1)", i), session); got.Access != classify.Read {
			b.Fatalf("SELECT g_%d(1): %v %s", i, got.Reason, got.Subject)
		}
		useTime += time.Since(started)
	}
	b.ReportMetric(float64(changeTime.Microseconds())/float64(b.N), "µs/change")
	b.ReportMetric(float64(useTime.Microseconds())/float64(b.N), "µs/use")
}
