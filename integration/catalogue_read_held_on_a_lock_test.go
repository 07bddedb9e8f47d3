package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A session's read of its own catalogue change is bounded: held on a lock (here an explicit LOCK
// of pg_description, which the read joins and the change does not touch), it fails after its
// limit (twice the catalogue's 2 s wait), the statement behind it runs, and the change is read by
// the catalogue's own connection. The session is not held for as long as the lock is: before the
// bound, the statement that used the change waited for the lock's release however long it took.
func TestSessionCatalogueReadHeldOnALockDoesNotHoldTheSession(t *testing.T) {
	c := sharedClusterFor(t)
	setup := `
CREATE SCHEMA IF NOT EXISTS rl_app AUTHORIZATION app;
CREATE OR REPLACE FUNCTION rl_app.rl_probe() RETURNS integer LANGUAGE sql STABLE AS $$SELECT 1$$;
DROP FUNCTION IF EXISTS rl_app.rl_added();`
	o := startOwlOnPrimaryAlone(t, c, setup)
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	aheadMust(t, conn, "SET search_path = rl_app, public")
	aheadMust(t, conn, "SELECT rl_probe()") // the catalogue is held from here

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	release := lockCatalogueTable(t, ctx, c.Nodes[0].DatabaseDSN(appDatabase), "pg_description")
	defer release()

	// A SET clause makes the change one the session reads (a function its statement describes
	// in full is taken without a read).
	aheadMust(t, conn, "CREATE FUNCTION rl_added() RETURNS integer LANGUAGE sql STABLE SET work_mem = '4MB' AS $$SELECT 42$$")
	type result struct {
		value int
		err   error
		took  time.Duration
	}
	done := make(chan result, 1)
	go func() {
		started := time.Now()
		var value int
		err := conn.QueryRow(ctx, "SELECT rl_added()").Scan(&value)
		done <- result{value, err, time.Since(started)}
	}()
	// The bound is 4 s; then the catalogue's own read of the change waits at most 2 s more.
	const within = 12 * time.Second
	select {
	case r := <-done:
		if r.err != nil || r.value != 42 {
			t.Fatalf("SELECT rl_added() with the session's read held: %d, %v after %s", r.value, r.err, r.took)
		}
		t.Logf("SELECT rl_added() answered %s after it was sent, with the read held on the lock", r.took.Round(time.Millisecond))
	case <-time.After(within):
		release()
		r := <-done
		t.Fatalf("SELECT rl_added() still waited %s after it was sent, with the session's catalogue read held on a lock (it ended %s after, once the lock was released: %v)", within, r.took.Round(time.Millisecond), r.err)
	}
	failed := false
	for _, e := range o.logs.Entries(t) {
		if e["message"] == "a session's read of its catalogue change failed; the change is read by the catalogue's own connection" {
			failed = true
		}
	}
	if !failed {
		t.Errorf("no log line says the session's read failed")
	}
	release()
	// The session goes on, and the change is known: rl_added reads, so the statement is a read.
	aheadMust(t, conn, "SELECT rl_added()")
	if reason, ok := loggedReason(t, o, "SELECT rl_added()"); !ok || reason == "" {
		t.Errorf("no routing line for SELECT rl_added() after the lock was released")
	}
}
