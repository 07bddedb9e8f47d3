package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Another session's temporary table is in no catalogue (the relations read leaves
// out pg_temp_* schemas), so a read of the relations has no business locking it. Here another
// session holds its temporary table, which has a CHECK calling a user function, in ACCESS
// EXCLUSIVE mode (a TRUNCATE or ALTER in an open transaction). PostgreSQL (the oracle) shows
// that pg_get_constraintdef of that CHECK waits for the table's lock. A whole read of the
// relations must then take about as long as a read of every OID range (the per-relation form,
// which never prints that CHECK), not wait out the lock in slices.
func TestAWholeRelationsReadDoesNotWaitOnAnotherSessionsTemporaryTable(t *testing.T) {
	primary, ctx := startPrimaryForTest(t, 2*time.Minute)
	conn := connectForTest(t, ctx, primary)
	other := connectForTest(t, ctx, primary)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION positive(int) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT $1 > 0 $$`); err != nil {
		t.Fatal(err)
	}
	// The temporary table first: an OID below the tables read, whatever join the plan picks.
	if _, err := other.Exec(ctx, `CREATE TEMP TABLE scratch (id int CHECK (positive(id)))`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE plain (id int CHECK (positive(id)))`); err != nil {
		t.Fatal(err)
	}
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "TRUNCATE scratch"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET search_path = pg_catalog; "+withoutJIT+"; "+giveWayToDDL()); err != nil {
		t.Fatal(err)
	}
	// The oracle: printing the temporary table's CHECK waits for its lock.
	_, err = conn.Exec(ctx, `SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
		WHERE c.relname = 'scratch' AND k.contype = 'c'`, pgx.QueryExecModeSimpleProtocol)
	if !lockWaited(err) {
		t.Fatalf("oracle: printing another session's locked temporary CHECK gave %v; want lock_timeout", err)
	}
	if testing.Verbose() {
		rows, err := conn.Query(ctx, "EXPLAIN "+fmt.Sprintf(relationsPart.wholeQuery, "true"))
		if err == nil {
			for rows.Next() {
				var line string
				rows.Scan(&line)
				t.Log(line)
			}
			rows.Close()
		}
	}
	var warnings []string
	start := time.Now()
	ranged, err := readRows(ctx, conn, relationsPart, filter{First: 0, Last: ^uint32(0), ranged: true}, &warnings)
	if err != nil {
		t.Fatal(err)
	}
	rangedTook := time.Since(start)
	start = time.Now()
	whole, err := readRows(ctx, conn, relationsPart, filter{}, &warnings)
	if err != nil {
		t.Fatal(err)
	}
	wholeTook := time.Since(start)
	t.Logf("read of every OID range: %d relations in %v; whole read: %d relations in %v; warnings %v", len(ranged), rangedTook, len(whole), wholeTook, warnings)
	if len(whole) != len(ranged) {
		t.Errorf("whole read %d relations, ranged %d", len(whole), len(ranged))
	}
	if wholeTook > rangedTook+time.Second {
		t.Errorf("the whole read took %v, waiting on another session's temporary table; the read of every OID range took %v", wholeTook, rangedTook)
	}
}
