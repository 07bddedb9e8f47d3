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
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
)

// TestDDLNeverDiesForACatalogueRead makes and drops, again and again, a schema of functions and
// views that read each other (DROP SCHEMA ... CASCADE, as a migration's down step or a test
// suite's teardown does) while the Manager's reads of the schema's names, a session's own read of
// them (SessionRead), and whole loads, run beside it without a pause.
//
// pg_get_viewdef locks each view it prints, and what that view reads, until its statement ends;
// the DROP locks the schema's objects as it walks them and what depends on each, in another
// order. Each can then hold a view the other waits for: a deadlock, which PostgreSQL breaks by
// failing the statement that has waited deadlock_timeout first. That must never be the user's
// DDL: a catalogue read waits on a lock for less than deadlock_timeout (giveWayToDDL,
// sessionGiveWay), so that it is the one to give up; the Manager reads again, and a session's read
// fails and leaves the change to the Manager.
func TestDDLNeverDiesForACatalogueRead(t *testing.T) {
	primary, ctx := startPrimaryForTest(t, 3*time.Minute)
	connect := func() *pgx.Conn { return connectForTest(t, ctx, primary) }

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
	// A session's own read of its change (SessionRead), as the proxy sends it on the session's
	// connection, of as many of the views as it reads.
	m := New(Options{Logger: zerolog.Nop(), Connect: func(ctx context.Context, database string) (*pgx.Conn, error) {
		return pgx.Connect(ctx, primary.DatabaseDSN(database))
	}})
	defer m.Close()
	// A call of a function the catalogue must look up loads it.
	classify.New(classify.Options{Catalogues: m}).ClassifyIn("SELECT no_such_function()", &classify.Context{Database: "postgres", User: "postgres"})
	sessionChanges := &classify.CatalogueChanges{Relations: wanted.relations[:maxSessionReadNames]}
	if m.PrepareSessionRead("postgres", sessionChanges) == nil {
		t.Fatal("no session read prepared once the catalogue is loaded")
	}
	var sessionReads, sessionReadsFailed atomic.Int64
	session := connect().PgConn()
	wg.Add(1)
	go func() {
		defer wg.Done()
		prepared := map[string]struct{}{}
		for churnCtx.Err() == nil && sessionReads.Load() < 100000 {
			read := m.PrepareSessionRead("postgres", sessionChanges)
			if read == nil {
				fail("session read %d: none prepared", sessionReads.Load())
				return
			}
			if _, err := session.Conn().Write(read.Messages(prepared)); err != nil {
				fail("session read %d: %v", sessionReads.Load(), err)
				return
			}
			if err := passReplies(ctx, session, read); err != nil {
				fail("session read %d: %v", sessionReads.Load(), err)
				return
			}
			if read.Err() != nil {
				sessionReadsFailed.Add(1) // gave way, or met a view dropped meanwhile: the Manager reads it
				for _, name := range read.StatementNames() {
					delete(prepared, name)
				}
			}
			sessionReads.Add(1)
		}
	}()

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
	if dropped.Load() < 5 || reads.Load() < 20 || loads.Load() < 5 || sessionReads.Load() < 20 {
		t.Errorf("too little ran to show anything: %d schemas dropped, %d reads, %d session reads, %d loads",
			dropped.Load(), reads.Load(), sessionReads.Load(), loads.Load())
	}
	t.Logf("%d schemas of %d functions and %d views made and dropped beside %d reads of their names (%d of them deadlocked and read again), %d session reads (%d failed) and %d whole loads",
		dropped.Load(), objects, objects, reads.Load(), deadlocksOfTheRead.Load(), sessionReads.Load(), sessionReadsFailed.Load(), loads.Load())
}

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}
