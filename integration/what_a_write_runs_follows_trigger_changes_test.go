package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// What a write runs besides the statement (its table's triggers, defaults, CHECK constraints and
// rules) is read with the table (classify.Relation.WriteRuns), so that what they do to the
// session stays with the client that wrote. These tests change a table's triggers after pgowl
// has read the table and classified a write of it, once through pgowl and once on the primary
// itself, and check that the next run of the same INSERT is seen for what it now does: the
// tenant its trigger sets stays with A, and B, given the one backend next, does not get it.

// writeRunsSetup makes a schema the application user owns, and in it a table (name) and a
// trigger function that sets the tenant from the row, as multi-tenant designs do.
func writeRunsSetup(t *testing.T, name string) {
	t.Helper()
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, fmt.Sprintf(`
	CREATE SCHEMA IF NOT EXISTS wrt AUTHORIZATION %[1]s;
	DROP TABLE IF EXISTS wrt.%[2]s;
	CREATE TABLE wrt.%[2]s (tenant text);
	ALTER TABLE wrt.%[2]s OWNER TO %[1]s;
	CREATE OR REPLACE FUNCTION wrt.set_tenant() RETURNS trigger LANGUAGE plpgsql AS $f$
	BEGIN
		PERFORM set_config('review_state.tenant', NEW.tenant, false);
		RETURN NEW;
	END $f$;
	ALTER FUNCTION wrt.set_tenant() OWNER TO %[1]s;`, appUser, name)); err != nil {
		t.Fatalf("set up: %v", err)
	}
	catchUp(t, c)
}

// aKeepsItsTenant checks that A, after its INSERT, still has the tenant the trigger set, as on a
// direct connection.
func aKeepsItsTenant(t *testing.T, a *pgconn.PgConn, want string) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	got, err := rvQueryOne(ctx, a, "SELECT coalesce(current_setting('review_state.tenant', true), '')")
	if err != nil {
		t.Fatalf("A's tenant: %v", err)
	}
	if got != want {
		t.Errorf("A's tenant after its INSERT: %q, want %q (a direct connection keeps what the trigger set)", got, want)
	}
}

// TestATriggerMadeThroughPgowlIsRunByTheNextWrite: A writes the table (its verdict is kept), then
// makes a trigger on it that sets the tenant, then runs the same INSERT again.
func TestATriggerMadeThroughPgowlIsRunByTheNextWrite(t *testing.T) {
	writeRunsSetup(t, "through")
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	insert := "INSERT INTO wrt.through VALUES ('tenant-a')"
	r3pExecAll(t, ctx, a, insert)
	checkNoLeakedState(t, b, "before the trigger")
	r3pExecAll(t, ctx, a, "CREATE TRIGGER t BEFORE INSERT ON wrt.through FOR EACH ROW EXECUTE FUNCTION wrt.set_tenant()")
	r3pExecAll(t, ctx, a, insert)
	checkNoLeakedState(t, b, "after A made the trigger and ran "+insert)
	aKeepsItsTenant(t, a, "tenant-a")
}

// TestATriggerMadePastPgowlIsRunByTheNextWrite: the same, with the trigger made on the primary
// itself; the change polls (classify.change_poll_interval, 1 s) find it.
func TestATriggerMadePastPgowlIsRunByTheNextWrite(t *testing.T) {
	writeRunsSetup(t, "past")
	c := sharedClusterFor(t)
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	insert := "INSERT INTO wrt.past VALUES ('tenant-p')"
	r3pExecAll(t, ctx, a, insert)
	checkNoLeakedState(t, b, "before the trigger")
	if err := c.Nodes[0].Exec(ctx, "CREATE TRIGGER t BEFORE INSERT ON wrt.past FOR EACH ROW EXECUTE FUNCTION wrt.set_tenant()"); err != nil {
		t.Fatalf("trigger: %v", err)
	}
	time.Sleep(3 * time.Second) // three polls
	r3pExecAll(t, ctx, a, insert)
	checkNoLeakedState(t, b, "3 s after the trigger was made on the primary, A ran "+insert)
	aKeepsItsTenant(t, a, "tenant-p")
}

// TestATriggerDisabledThroughPgowlNoLongerCounts: a trigger that takes an advisory lock keeps A's
// backend A's while the lock is held; once the trigger is disabled the INSERT takes none, and B
// is given the backend at once rather than waiting for it (DATABASE_BUSY).
func TestATriggerDisabledThroughPgowlNoLongerCounts(t *testing.T) {
	writeRunsSetup(t, "disabled")
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, `CREATE OR REPLACE FUNCTION wrt.take_lock() RETURNS trigger LANGUAGE plpgsql AS $f$
	BEGIN
		PERFORM pg_advisory_lock(7521);
		RETURN NEW;
	END $f$;
	ALTER FUNCTION wrt.take_lock() OWNER TO `+appUser); err != nil {
		t.Fatalf("set up: %v", err)
	}
	o := rvStartOneBackend(t, nil)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a,
		"CREATE TRIGGER t BEFORE INSERT ON wrt.disabled FOR EACH ROW EXECUTE FUNCTION wrt.take_lock()",
		"INSERT INTO wrt.disabled VALUES ('first')")
	probe := func(what string) (string, error) {
		probeCtx := timeoutCtx(t, statementTimeout)
		return rvQueryOne(probeCtx, b, stateLeakProbe)
	}
	if _, err := probe("while the trigger's lock is held"); rvSQLState(err) != "53300" {
		t.Fatalf("while A holds the lock its trigger took, B's probe: %v; want DATABASE_BUSY (A's backend stays A's)", err)
	}
	r3pExecAll(t, ctx, a, "SELECT pg_advisory_unlock_all()", "ALTER TABLE wrt.disabled DISABLE TRIGGER t",
		"INSERT INTO wrt.disabled VALUES ('second')")
	got, err := probe("after the trigger was disabled")
	if err != nil || got != stateLeakClean {
		t.Errorf("after the trigger was disabled and A ran the INSERT again, B's probe: %q, err %v (SQLSTATE %s); want a clean backend at once",
			got, err, rvSQLState(err))
	}
}
