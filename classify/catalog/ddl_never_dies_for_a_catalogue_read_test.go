package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestDDLNeverDiesForACatalogueRead makes and drops, again and again, a schema of functions and
// views that read each other (DROP SCHEMA ... CASCADE, as a migration's down step or a test
// suite's teardown does) while the Manager's reads of the schema's names, and whole loads, run
// beside it without a pause.
//
// pg_get_viewdef locks each view it prints, and what that view reads, until its statement ends;
// the DROP locks the schema's objects as it walks them and what depends on each, in another
// order. Each can then hold a view the other waits for: a deadlock, which PostgreSQL breaks by
// failing the statement that has waited deadlock_timeout first. That must never be the user's
// DDL: a catalogue read waits on a lock for less than deadlock_timeout (giveWayToDDL), so that it
// is the one to give up, and it is read again.
func TestDDLNeverDiesForACatalogueRead(t *testing.T) {
	primary, ctx := startPrimaryForTest(t, 3*time.Minute)
	connect := func() *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, primary.DatabaseDSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}

	const objects = 40
	var wanted namedReads
	for i := 0; i < objects; i++ {
		wanted.functions = append(wanted.functions, fmt.Sprintf("f%d", i))
		wanted.relations = append(wanted.relations, fmt.Sprintf("v%d", i))
	}
	wanted.types = wanted.relations

	const churnFor = 8 * time.Second
	churnCtx, stopChurn := context.WithTimeout(ctx, churnFor)
	defer stopChurn()
	var dropped, deadlocksOfTheRead atomic.Int64
	var failures []string
	var failed sync.Mutex
	fail := func(format string, args ...any) {
		failed.Lock()
		defer failed.Unlock()
		if len(failures) < 5 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup

	ddl := connect()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; churnCtx.Err() == nil && i < 10000; i++ {
			var script strings.Builder
			script.WriteString("CREATE SCHEMA chain;\n")
			for f := 0; f < objects; f++ {
				fmt.Fprintf(&script, "CREATE FUNCTION chain.f%d(n bigint) RETURNS bigint LANGUAGE sql STABLE AS $$ SELECT n + %d $$;\n", f, f)
			}
			// The views are made in the opposite order to the functions they call.
			fmt.Fprintf(&script, "CREATE VIEW chain.v0 AS SELECT chain.f%d(1) AS n;\n", objects-1)
			for v := 1; v < objects; v++ {
				fmt.Fprintf(&script, "CREATE VIEW chain.v%d AS SELECT chain.f%d(n) AS n FROM chain.v%d;\n", v, objects-1-v, v-1)
			}
			if _, err := ddl.Exec(ctx, script.String()); err != nil {
				fail("round %d, making the schema: %v", i, err)
				return
			}
			if _, err := ddl.Exec(ctx, "DROP SCHEMA chain CASCADE"); err != nil {
				fail("round %d, DROP SCHEMA chain CASCADE: %v", i, err)
				return
			}
			dropped.Add(1)
		}
	}()

	// Two readers of the schema's names, as the Manager reads them when told of a change, and a
	// loader of the whole catalogue.
	var reads, loads atomic.Int64
	for reader := 0; reader < 2; reader++ {
		conn := connect()
		if err := prepareConnection(ctx, conn); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for churnCtx.Err() == nil && reads.Load() < 100000 {
				_, err := readNamesBatch(ctx, conn, wanted)
				if err != nil && objectError(err) {
					if isDeadlock(err) {
						deadlocksOfTheRead.Add(1)
					}
					_, err = readNamesOneByOne(ctx, conn, wanted)
				}
				if err != nil {
					fail("read %d of the schema's names: %v", reads.Load(), err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	loader := connect()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for churnCtx.Err() == nil && loads.Load() < 10000 {
			if _, err := Load(ctx, loader, "postgres", Overrides{}); err != nil {
				fail("load %d: %v", loads.Load(), err)
				return
			}
			loads.Add(1)
		}
	}()
	wg.Wait()

	for _, failure := range failures {
		t.Error(failure)
	}
	if dropped.Load() < 5 || reads.Load() < 20 || loads.Load() < 5 {
		t.Errorf("too little ran to show anything: %d schemas dropped, %d reads, %d loads", dropped.Load(), reads.Load(), loads.Load())
	}
	t.Logf("%d schemas of %d functions and %d views made and dropped beside %d reads of their names (%d of them deadlocked and read again) and %d whole loads",
		dropped.Load(), objects, objects, reads.Load(), deadlocksOfTheRead.Load(), loads.Load())
}

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}
