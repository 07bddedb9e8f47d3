package catalog

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
)

// TestWholeLoadWaitsOutALongCatalogueLock holds one system catalogue locked (LOCK TABLE ... IN
// ACCESS EXCLUSIVE MODE, as VACUUM FULL of that catalogue takes it) for several times a catalogue
// read's lock_timeout (maxLockWait), while the Manager's kind of whole load runs on a connection
// prepared as the Manager prepares its own (prepareConnection: a short lock_timeout, so that a read
// never outwaits DDL into a deadlock, giveWayToDDL). Every read of the load must wait the lock out
// in slices and then succeed: the schemas, the default search paths and the configured
// assertions (to_regprocedure) as well as the parts readRows reads. A read that gave up on the
// lock once must not fail the load, nor drop an assertion with a warning.
func TestWholeLoadWaitsOutALongCatalogueLock(t *testing.T) {
	primary, ctx := startPrimaryForTest(t, 2*time.Minute)
	setup := connectForTest(t, ctx, primary)
	if _, err := setup.Exec(ctx, `
CREATE SCHEMA held;
CREATE FUNCTION held.reader(n int) RETURNS int LANGUAGE sql AS $$ SELECT n $$;
ALTER DATABASE postgres SET search_path = held, public`); err != nil {
		t.Fatal(err)
	}
	overrides := Overrides{Readonly: []string{"held.reader(int)"}}
	var readerOID uint32
	if err := setup.QueryRow(ctx, "SELECT 'held.reader(int)'::regprocedure::oid").Scan(&readerOID); err != nil {
		t.Fatal(err)
	}

	const held = 4 * maxLockWait
	for _, catalogue := range []string{"pg_namespace", "pg_db_role_setting", "pg_proc", "pg_class"} {
		t.Run(catalogue, func(t *testing.T) {
			loader := connectForTest(t, ctx, primary)
			// As the Manager does, the connection is prepared before any lock is held.
			if err := prepareConnection(ctx, loader); err != nil {
				t.Fatal(err)
			}

			holder, err := setup.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Exec(ctx, "LOCK TABLE pg_catalog."+catalogue+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			released := make(chan struct{})
			go func() {
				defer close(released)
				time.Sleep(held)
				holder.Rollback(context.Background()) //nolint:errcheck // nothing was changed
			}()

			began := time.Now()
			data, assertions, err := loadData(ctx, loader, "postgres", overrides)
			took := time.Since(began)
			<-released
			if err != nil {
				t.Fatalf("the load failed under a lock of %s held %v: %v", catalogue, held, err)
			}
			t.Logf("load with %s locked for %v took %v", catalogue, held, took.Round(time.Millisecond))
			if took < held/2 {
				t.Errorf("the load took %v: it did not meet the lock of %s, so this case tests nothing", took, catalogue)
			}
			if assertions[readerOID] != "readonly" {
				t.Errorf("the assertion on held.reader(int) was not resolved: %v; warnings: %q", assertions, data.Warnings)
			}
			for _, w := range data.Warnings {
				if strings.Contains(w, "lock") {
					t.Errorf("a read gave up on the lock instead of waiting it out: %s", w)
				}
			}
			if !slices.Contains(data.Schemas, "held") {
				t.Errorf("schemas read: %q, without held", data.Schemas)
			}
			if got := data.DefaultSearchPath[""]; !slices.Equal(got, []string{"held", "public"}) {
				t.Errorf("the database's default search_path read as %q", got)
			}
			if !slices.ContainsFunc(data.Functions, func(f classify.Function) bool { return f.OID == readerOID }) {
				t.Errorf("held.reader is not among the %d functions read", len(data.Functions))
			}
		})
	}
}
