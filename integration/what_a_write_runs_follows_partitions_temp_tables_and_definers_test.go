package integration

import (
	"strings"
	"testing"
	"time"
)

// What a write runs, as pgowl follows it, when the trigger reaches the written table
// by way of its partitioned parent, when the table is temporary, when the trigger's function
// is SECURITY DEFINER (its body's "$user" is its owner), when the function is replaced after
// pgowl classified the write, and when the trigger is a deferred constraint trigger (it runs at
// COMMIT, a statement of its own).

const h1MoreSetup = `
DO $$ BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'h1_owner') THEN CREATE ROLE h1_owner NOLOGIN; END IF;
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'H1_Owner') THEN CREATE ROLE "H1_Owner" NOLOGIN; END IF;
END $$;
CREATE OR REPLACE FUNCTION public.h1m_tenant_trg() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-' || TG_TABLE_NAME, false);
	RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION public.h1m_tenant_row() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', NEW.tenant, false);
	RETURN NEW;
END $f$;
CREATE OR REPLACE FUNCTION public.h1m_lock_trg() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM pg_advisory_lock(7591);
	RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION public.h1m_touch() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	RETURN NEW;
END $f$;
-- "$user" schemas of the two owners hold an h1m_g() that sets the tenant; public's does nothing.
CREATE SCHEMA IF NOT EXISTS h1_owner AUTHORIZATION h1_owner;
CREATE SCHEMA IF NOT EXISTS "H1_Owner" AUTHORIZATION "H1_Owner";
GRANT USAGE ON SCHEMA h1_owner, "H1_Owner" TO PUBLIC;
CREATE OR REPLACE FUNCTION h1_owner.h1m_g() RETURNS void LANGUAGE plpgsql AS $f$
BEGIN PERFORM set_config('review_state.tenant', 'from-h1_owner', false); END $f$;
CREATE OR REPLACE FUNCTION "H1_Owner".h1m_g() RETURNS void LANGUAGE plpgsql AS $f$
BEGIN PERFORM set_config('review_state.tenant', 'from-H1_Owner', false); END $f$;
CREATE OR REPLACE FUNCTION public.h1m_g() RETURNS void LANGUAGE plpgsql AS $f$ BEGIN NULL; END $f$;
CREATE OR REPLACE FUNCTION public.h1m_sd_trg() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $f$
BEGIN PERFORM h1m_g(); RETURN NULL; END $f$;
ALTER FUNCTION public.h1m_sd_trg() OWNER TO h1_owner;
CREATE OR REPLACE FUNCTION public.h1m_sd_trg_mixed() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $f$
BEGIN PERFORM h1m_g(); RETURN NULL; END $f$;
ALTER FUNCTION public.h1m_sd_trg_mixed() OWNER TO "H1_Owner";
DROP TABLE IF EXISTS public.h1m_cp, public.h1m_cp2, public.h1m_ep, public.h1m_sd, public.h1m_sd_mixed, public.h1m_rp, public.h1m_rp2,
	public.h1m_def_lock, public.h1m_def_tenant CASCADE;
CREATE TABLE public.h1m_cp (id int) PARTITION BY LIST (id);
CREATE TABLE public.h1m_cp_1 PARTITION OF public.h1m_cp FOR VALUES IN (1);
CREATE TABLE public.h1m_cp2 (id int) PARTITION BY LIST (id);
CREATE TABLE public.h1m_cp2_1 PARTITION OF public.h1m_cp2 FOR VALUES IN (1);
CREATE TABLE public.h1m_ep (id int) PARTITION BY LIST (id);
CREATE TABLE public.h1m_ep_1 PARTITION OF public.h1m_ep FOR VALUES IN (1);
CREATE TRIGGER t AFTER INSERT ON public.h1m_ep FOR EACH ROW EXECUTE FUNCTION public.h1m_tenant_trg();
ALTER TABLE public.h1m_ep DISABLE TRIGGER t;
CREATE TABLE public.h1m_sd (id int);
CREATE TRIGGER t AFTER INSERT ON public.h1m_sd FOR EACH ROW EXECUTE FUNCTION public.h1m_sd_trg();
CREATE TABLE public.h1m_sd_mixed (id int);
CREATE TRIGGER t AFTER INSERT ON public.h1m_sd_mixed FOR EACH ROW EXECUTE FUNCTION public.h1m_sd_trg_mixed();
CREATE OR REPLACE FUNCTION public.h1m_rp_fn() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RETURN NULL; END $f$;
CREATE OR REPLACE FUNCTION public.h1m_rp2_fn() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RETURN NULL; END $f$;
ALTER FUNCTION public.h1m_rp_fn() OWNER TO app; ALTER FUNCTION public.h1m_rp2_fn() OWNER TO app;
CREATE TABLE public.h1m_rp (id int);
CREATE TRIGGER t AFTER INSERT ON public.h1m_rp FOR EACH ROW EXECUTE FUNCTION public.h1m_rp_fn();
CREATE TABLE public.h1m_rp2 (id int);
CREATE TRIGGER t AFTER INSERT ON public.h1m_rp2 FOR EACH ROW EXECUTE FUNCTION public.h1m_rp2_fn();
CREATE TABLE public.h1m_def_lock (id int);
CREATE CONSTRAINT TRIGGER t AFTER INSERT ON public.h1m_def_lock DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION public.h1m_lock_trg();
CREATE TABLE public.h1m_def_tenant (id int);
CREATE CONSTRAINT TRIGGER t AFTER INSERT ON public.h1m_def_tenant DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION public.h1m_tenant_trg();
DO $$ DECLARE r text; BEGIN
	FOREACH r IN ARRAY ARRAY['h1m_cp', 'h1m_cp_1', 'h1m_cp2', 'h1m_cp2_1', 'h1m_ep', 'h1m_ep_1', 'h1m_sd', 'h1m_sd_mixed', 'h1m_rp', 'h1m_rp2',
		'h1m_def_lock', 'h1m_def_tenant'] LOOP
		EXECUTE format('ALTER TABLE public.%I OWNER TO app', r);
	END LOOP;
END $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public, h1_owner, "H1_Owner" TO app;
`

func writeRunsMoreSetUp(t *testing.T) {
	t.Helper()
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, h1MoreSetup); err != nil {
		t.Fatalf("set up: %v", err)
	}
	catchUp(t, c)
}

// writeRunsOracle runs sql as app directly on the primary and requires the tenant it leaves to be want.
func writeRunsOracle(t *testing.T, sql, want string) {
	t.Helper()
	c := sharedClusterFor(t)
	got := danDirectAs(t, c.Nodes[0], appUser, appPassword,
		sql+"; SELECT coalesce(current_setting('review_state.tenant', true), '')")
	if !strings.Contains(got, want) {
		t.Fatalf("oracle: directly on the primary, %s left the tenant %q; want %q", sql, got, want)
	}
}

// TestTriggerMadeOnAPartitionedTableReachesItsPartitions: CREATE TRIGGER on a partitioned
// table makes a clone on each partition (pg_trigger.tgparentid), and ALTER TABLE ... ENABLE
// TRIGGER on it enables the clones too: an INSERT straight into the partition right after runs
// the trigger. pgowl reads again only the table the statement names.
func TestTriggerMadeOnAPartitionedTableReachesItsPartitions(t *testing.T) {
	writeRunsMoreSetUp(t)
	t.Run("CreateTrigger", func(t *testing.T) {
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		insert := "INSERT INTO public.h1m_cp_1 VALUES (1)"
		r3pExecAll(t, ctx, a, insert)
		checkNoLeakedState(t, b, "before the trigger")
		r3pExecAll(t, ctx, a, "CREATE TRIGGER t AFTER INSERT ON public.h1m_cp FOR EACH ROW EXECUTE FUNCTION public.h1m_tenant_trg()", insert)
		checkNoLeakedState(t, b, "after A made a trigger on the partitioned table and ran "+insert)
	})
	t.Run("EnableTrigger", func(t *testing.T) {
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		insert := "INSERT INTO public.h1m_ep_1 VALUES (1)"
		r3pExecAll(t, ctx, a, insert)
		checkNoLeakedState(t, b, "while the trigger is disabled")
		r3pExecAll(t, ctx, a, "ALTER TABLE public.h1m_ep ENABLE TRIGGER t", insert)
		checkNoLeakedState(t, b, "after A enabled the partitioned table's trigger and ran "+insert)
	})
	// The change polls (1 s) find the clones' pg_trigger rows: after three of them the partition's
	// triggers are known. The two cases above are a window of up to one poll, not a lasting miss.
	t.Run("CreateTriggerAfterThePolls", func(t *testing.T) {
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		insert := "INSERT INTO public.h1m_cp2_1 VALUES (1)"
		r3pExecAll(t, ctx, a, insert)
		r3pExecAll(t, ctx, a, "CREATE TRIGGER t AFTER INSERT ON public.h1m_cp2 FOR EACH ROW EXECUTE FUNCTION public.h1m_tenant_trg()")
		time.Sleep(3 * time.Second)
		r3pExecAll(t, ctx, a, insert)
		checkNoLeakedState(t, b, "3 s after A made a trigger on the partitioned table, A ran "+insert)
	})
	// The oracle, last: the clone fires on an INSERT straight into the partition.
	writeRunsOracle(t, "INSERT INTO public.h1m_cp_1 VALUES (1)", "from-h1m_cp_1")
	writeRunsOracle(t, "INSERT INTO public.h1m_ep_1 VALUES (1)", "from-h1m_ep_1")
}

// TestTemporaryTableTriggerStateOutlivesTheTable: a temporary table is in no catalogue pgowl
// reads, so what writing it runs is taken to be nothing; the temporary table pins the session,
// but once it is dropped, the tenant its trigger set is still on the backend.
func TestTemporaryTableTriggerStateOutlivesTheTable(t *testing.T) {
	writeRunsMoreSetUp(t)
	stmts := []string{
		"CREATE TEMP TABLE h1m_tmp (tenant text)",
		"CREATE TRIGGER t BEFORE INSERT ON h1m_tmp FOR EACH ROW EXECUTE FUNCTION public.h1m_tenant_row()",
		"INSERT INTO h1m_tmp VALUES ('tenant-tmp')",
		"DROP TABLE h1m_tmp",
	}
	writeRunsOracle(t, strings.Join(stmts, "; "), "tenant-tmp")
	checkStatementsLeaveNoState(t, stmts...)
}

// TestSecurityDefinerTriggerFunctionDollarUser: a SECURITY DEFINER trigger function's body
// resolves h1m_g() along the caller's path ("$user", public) with "$user" its owner: the owner's
// h1m_g() sets the tenant. The owner's name needs quoting in the second case.
func TestSecurityDefinerTriggerFunctionDollarUser(t *testing.T) {
	writeRunsMoreSetUp(t)
	for _, tc := range []struct{ name, sql, tenant string }{
		{"Owner", "INSERT INTO public.h1m_sd VALUES (1)", "from-h1_owner"},
		{"MixedCaseOwner", "INSERT INTO public.h1m_sd_mixed VALUES (1)", "from-H1_Owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeRunsOracle(t, tc.sql, tc.tenant)
			checkStatementsLeaveNoState(t, tc.sql)
		})
	}
}

// TestTriggerFunctionReplacedAfterTheWriteWasClassified: the INSERT's verdict is kept; then
// the trigger's function is replaced by one that sets the tenant, through pgowl and on the
// primary itself (the change polls find it).
func TestTriggerFunctionReplacedAfterTheWriteWasClassified(t *testing.T) {
	writeRunsMoreSetUp(t)
	c := sharedClusterFor(t)
	replace := func(fn string) string {
		return "CREATE OR REPLACE FUNCTION public." + fn + "() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN " +
			"PERFORM set_config('review_state.tenant', 'from-replaced', false); RETURN NULL; END $f$"
	}
	t.Run("ThroughPgowl", func(t *testing.T) {
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		insert := "INSERT INTO public.h1m_rp VALUES (1)"
		r3pExecAll(t, ctx, a, insert)
		checkNoLeakedState(t, b, "before the replace")
		r3pExecAll(t, ctx, a, replace("h1m_rp_fn"), insert)
		checkNoLeakedState(t, b, "after A replaced the trigger function and ran "+insert)
	})
	t.Run("PastPgowl", func(t *testing.T) {
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		insert := "INSERT INTO public.h1m_rp2 VALUES (1)"
		r3pExecAll(t, ctx, a, insert)
		checkNoLeakedState(t, b, "before the replace")
		if err := c.Nodes[0].Exec(ctx, replace("h1m_rp2_fn")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // three polls
		r3pExecAll(t, ctx, a, insert)
		checkNoLeakedState(t, b, "3 s after the trigger function was replaced on the primary, A ran "+insert)
	})
	writeRunsOracle(t, "INSERT INTO public.h1m_rp2 VALUES (1)", "from-replaced")
}

// TestDeferredConstraintTriggerRunsAtCommit: a DEFERRABLE INITIALLY DEFERRED constraint
// trigger runs at COMMIT, not with the INSERT that queued it.
func TestDeferredConstraintTriggerRunsAtCommit(t *testing.T) {
	writeRunsMoreSetUp(t)
	t.Run("AdvisoryLock", func(t *testing.T) {
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		r3pExecAll(t, ctx, a, "BEGIN", "INSERT INTO public.h1m_def_lock VALUES (1)", "COMMIT")
		checkNoLeakedState(t, b, "after A's COMMIT ran the deferred trigger that takes a lock")
		r3pExecAll(t, ctx, a, "SELECT pg_advisory_unlock_all()")
	})
	t.Run("Tenant", func(t *testing.T) {
		writeRunsOracle(t, "BEGIN; INSERT INTO public.h1m_def_tenant VALUES (1); COMMIT", "from-h1m_def_tenant")
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		r3pExecAll(t, ctx, a, "BEGIN", "INSERT INTO public.h1m_def_tenant VALUES (1)", "COMMIT")
		checkNoLeakedState(t, b, "after A's COMMIT ran the deferred trigger that sets the tenant")
		aKeepsItsTenant(t, a, "from-h1m_def_tenant")
	})
}
