package catalog_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// TestLoadSurvivesConcurrentDDL drops and creates views, types and domains in a loop while whole
// catalogue loads and reads of changed names run: no load fails (an object dropped while it is read
// is read again or left out), and functions the DDL does not touch are classified as before with
// every catalogue read.
func TestLoadSurvivesConcurrentDDL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary, admin := startPrimary(t, ctx)
	for _, sql := range []string{
		"CREATE TABLE audit (msg text)",
		"CREATE FUNCTION steady_reader() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM audit $$",
		"CREATE FUNCTION steady_writer(m text) RETURNS void LANGUAGE sql AS $$ INSERT INTO audit VALUES (m) $$",
		"CREATE VIEW steady_view AS SELECT steady_reader() AS n",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	// Two sessions change views, types and domains as fast as they can, for a bounded time.
	const churnFor = 6 * time.Second
	churnCtx, stopChurn := context.WithTimeout(ctx, churnFor)
	defer stopChurn()
	var churned atomic.Int64
	var churners sync.WaitGroup
	churnErrors := make(chan error, 2)
	for worker := 0; worker < 2; worker++ {
		churners.Add(1)
		go func() {
			defer churners.Done()
			conn, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
			if err != nil {
				churnErrors <- err
				return
			}
			defer conn.Close(context.Background())
			for i := 0; churnCtx.Err() == nil && i < 100000; i++ {
				name := fmt.Sprintf("churn_%d_%d", worker, i%4)
				for _, sql := range []string{
					fmt.Sprintf("CREATE VIEW %s_v AS SELECT n, n + %d AS m FROM steady_view", name, i),
					fmt.Sprintf("CREATE TYPE %s_t AS (a int, b text)", name),
					fmt.Sprintf("CREATE DOMAIN %s_d AS int CHECK (VALUE > %d)", name, i),
					fmt.Sprintf("DROP VIEW %s_v", name),
					fmt.Sprintf("DROP TYPE %s_t", name),
					fmt.Sprintf("DROP DOMAIN %s_d", name),
				} {
					if _, err := conn.Exec(churnCtx, sql); err != nil {
						if churnCtx.Err() != nil {
							return
						}
						churnErrors <- fmt.Errorf("%s: %w", sql, err)
						return
					}
				}
				churned.Add(1)
			}
		}()
	}

	conn, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	classifier := classify.New(classify.Options{CacheSize: -1})
	session := &classify.Context{Database: "postgres", User: "postgres"}
	check := func(cat *classify.Catalogue, round int) {
		t.Helper()
		for _, tc := range []struct {
			sql    string
			access classify.Access
			reason classify.Reason
		}{
			{"SELECT steady_reader()", classify.Read, classify.ReasonReadOnly},
			{"SELECT * FROM steady_view", classify.Read, classify.ReasonReadOnly},
			{"SELECT steady_writer('x')", classify.Write, classify.ReasonWritingFunction},
		} {
			if got := classifier.ClassifyWith(tc.sql, session, cat); got.Access != tc.access || got.Reason != tc.reason {
				t.Errorf("load %d: %s: %v %v (%s), want %v %v", round, tc.sql, got.Access, got.Reason, got.Subject, tc.access, tc.reason)
			}
		}
	}
	// The first half of the churn runs beside whole loads, the second beside the manager's reads.
	halfway := time.Now().Add(churnFor / 2)
	loads := 0
	for time.Now().Before(halfway) && churnCtx.Err() == nil && loads < 2000 {
		cat, err := catalog.Load(ctx, conn, "postgres", catalog.Overrides{})
		if err != nil {
			t.Fatalf("load %d failed while DDL ran beside it: %v", loads, err)
		}
		check(cat, loads)
		loads++
	}

	// The manager's reads of changed names, with the same churn.
	m := catalog.New(catalog.Options{
		Connect: func(ctx context.Context, database string) (*pgx.Conn, error) {
			return pgx.Connect(ctx, primary.DatabaseDSN(database))
		},
		Wait: 10 * time.Second,
	})
	managed := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	refreshes := 0
	for churnCtx.Err() == nil && refreshes < 2000 {
		worker, slot := refreshes%2, refreshes%4
		names := fmt.Sprintf("churn_%d_%d", worker, slot)
		managed.CatalogueChanged(session, &classify.CatalogueChanges{
			Relations: []string{names + "_v"},
			Types:     []string{names + "_t", "_" + names + "_t", names + "_d", "_" + names + "_d", names + "_v", "_" + names + "_v"},
		})
		got := managed.ClassifyIn("SELECT steady_writer('y'), steady_reader()", session)
		if got.Access != classify.Write || got.Reason != classify.ReasonWritingFunction {
			t.Errorf("refresh %d: %v %v (%s %q), want write WRITING_FUNCTION", refreshes, got.Access, got.Reason, got.Subject, got.Warnings)
		}
		if got := managed.ClassifyIn("SELECT steady_reader() FROM steady_view", session); got.Access != classify.Read {
			t.Errorf("refresh %d: steady_reader over steady_view: %v %v (%s %q)", refreshes, got.Access, got.Reason, got.Subject, got.Warnings)
		}
		refreshes++
	}
	stopChurn()
	churners.Wait()
	close(churnErrors)
	for err := range churnErrors {
		t.Errorf("churn: %v", err)
	}
	if churned.Load() < 10 || loads < 5 || refreshes < 5 {
		t.Errorf("too little ran to show anything: %d churn rounds, %d loads, %d refreshes", churned.Load(), loads, refreshes)
	}
	t.Logf("%d churn rounds, %d whole loads, %d reads of changed names beside them", churned.Load(), loads, refreshes)
}
