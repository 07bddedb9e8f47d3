package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A statement that uses a catalogue change goes to the node before its session's read of the
// change is read (pgowl in front of the primary alone); without a pooled connection that carries
// the session's settings it goes on the read's own connection, behind the read. A client's cancel
// request sent meanwhile must cancel the statement: passed on while the node still runs the read,
// it would cancel the read instead and leave the statement running.
//
// The read is held on the node with a lock on pg_description, which it reads and the CREATE
// FUNCTION does not touch; the cancel is sent while it waits, then the lock is released.
func TestCancelOfAStatementBehindItsSessionsCatalogueReadCancelsTheStatement(t *testing.T) {
	c := sharedClusterFor(t)
	setup := `
CREATE SCHEMA IF NOT EXISTS cb_app AUTHORIZATION app;
CREATE OR REPLACE FUNCTION cb_app.cb_probe() RETURNS integer LANGUAGE sql STABLE AS $$SELECT 1$$;
DROP FUNCTION IF EXISTS cb_app.cb_sleeper_soon(), cb_app.cb_sleeper_held();`
	o := startOwlOnPrimaryAlone(t, c, setup)
	for _, tc := range []struct {
		name, function string
		// heldPastWait: the read stays held past the time a cancel request waits for it; the
		// request then cancels the read, and pgowl passes on another for the statement.
		heldPastWait bool
	}{
		{"read released soon", "cb_sleeper_soon", false},
		{"read held past the wait", "cb_sleeper_held", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cancelBehindHeldRead(t, c.Nodes[0].DatabaseDSN(appDatabase), o, tc.function, tc.heldPastWait)
		})
	}
}

// cancelBehindHeldRead creates function (a long pg_sleep) with the session's read of it held on the
// node, calls it, sends a cancel request, and wants the call to end with 57014.
func cancelBehindHeldRead(t *testing.T, superuserDSN string, o *owl, function string, heldPastWait bool) {
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	// SET, not a startup parameter: no other pooled connection carries the session's settings,
	// so the statement goes behind the read on the read's connection.
	aheadMust(t, conn, "SET search_path = cb_app, public")
	aheadMust(t, conn, "SELECT cb_probe()") // the catalogue is held from here

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unlock := lockCatalogueTable(t, ctx, superuserDSN, "pg_description")
	defer unlock()

	aheadMust(t, conn, "CREATE FUNCTION "+function+"() RETURNS void LANGUAGE sql AS $$SELECT pg_sleep(60)$$")
	type result struct {
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		started := time.Now()
		_, err := conn.Exec(ctx, "SELECT "+function+"()")
		done <- result{err, time.Since(started)}
	}()
	time.Sleep(500 * time.Millisecond) // the statement is on the node's connection, behind the read
	select {
	case r := <-done:
		t.Fatalf("SELECT %s() ended before the cancel, with the read held: %v", function, r.err)
	default:
	}
	cancelled := make(chan error, 1)
	go func() { cancelled <- conn.PgConn().CancelRequest(ctx) }()
	if !heldPastWait {
		time.Sleep(300 * time.Millisecond) // with the read still held on the node
		unlock()
	}

	select {
	case r := <-done:
		var pgErr *pgconn.PgError
		if !errors.As(r.err, &pgErr) || pgErr.Code != "57014" {
			t.Fatalf("SELECT %s() after a cancel request: %v after %s, want SQLSTATE 57014 (query_canceled)", function, r.err, r.took)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("SELECT %s() still runs 15 s after its cancel request: the request cancelled the session's catalogue read instead", function)
	}
	if err := <-cancelled; err != nil {
		t.Errorf("cancel request: %v", err)
	}
	unlock()
	// The session goes on, with the change read (by the session, or by the catalogue itself
	// when the cancel reached the read).
	aheadMust(t, conn, "SELECT cb_probe()")
}

// lockCatalogueTable takes an ACCESS EXCLUSIVE lock on pg_catalog.table over a connection of its
// own to dsn, in a transaction left open: a session's catalogue read that reads the table waits
// for it. unlock commits (once; later calls do nothing), and is safe to defer.
func lockCatalogueTable(t *testing.T, ctx context.Context, dsn, table string) (unlock func()) {
	t.Helper()
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close(context.Background()) })
	if _, err := locker.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, "LOCK TABLE pg_catalog."+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	locked := true
	return func() {
		if locked {
			locked = false
			if _, err := locker.Exec(ctx, "COMMIT"); err != nil {
				t.Errorf("release the lock on %s: %v", table, err)
			}
		}
	}
}
