package integration

import (
	"testing"
)

// TestDeallocateAsSQLThenPrepareAgain prepares a statement with the
// extended protocol, drops it with DEALLOCATE sent as SQL, prepares the same
// name again and runs it, as PostgreSQL allows: the name is free after the
// DEALLOCATE, and the new statement runs.
func TestDeallocateAsSQLThenPrepareAgain(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	conn := o.connect(t, nil)
	pg := conn.PgConn()
	if _, err := pg.Prepare(ctx, "ps", "SELECT 'first'::text", nil); err != nil {
		t.Fatalf("prepare ps: %v", err)
	}
	if got, err := rvExecPrepared(ctx, pg, "ps"); err != nil || got != "first" {
		t.Fatalf("ps runs: %q, %v; want first", got, err)
	}
	if _, err := pg.Exec(ctx, "DEALLOCATE ps").ReadAll(); err != nil {
		t.Fatalf("DEALLOCATE ps as SQL: %v", err)
	}
	if _, err := rvExecPrepared(ctx, pg, "ps"); rvSQLState(err) != "26000" {
		t.Errorf("ps after DEALLOCATE: %v, want 26000 (it no longer exists)", err)
	}
	if _, err := pg.Prepare(ctx, "ps", "SELECT 'second'::text", nil); err != nil {
		t.Fatalf("prepare ps again: %v", err)
	}
	if got, err := rvExecPrepared(ctx, pg, "ps"); err != nil || got != "second" {
		t.Errorf("ps prepared again runs: %q, %v; want second", got, err)
	}
	// DEALLOCATE ALL and DEALLOCATE PREPARE name free the name alike.
	if _, err := pg.Exec(ctx, "DEALLOCATE PREPARE ps").ReadAll(); err != nil {
		t.Fatalf("DEALLOCATE PREPARE ps: %v", err)
	}
	if _, err := pg.Prepare(ctx, "ps", "SELECT 'third'::text", nil); err != nil {
		t.Fatalf("prepare ps a third time: %v", err)
	}
	if got, err := rvExecPrepared(ctx, pg, "ps"); err != nil || got != "third" {
		t.Errorf("ps prepared a third time runs: %q, %v; want third", got, err)
	}
}
