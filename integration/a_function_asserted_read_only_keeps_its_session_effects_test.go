package integration

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
)

// stateLeakAssertedSetup creates functions that change session state without writing, so that
// an operator may assert them read-only (classify.functions.readonly) for their callers to read
// on standbys: a tenant switch, a role switch, an advisory lock.
func stateLeakAssertedSetup(t *testing.T) {
	t.Helper()
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, `
	CREATE OR REPLACE FUNCTION public.review_state_set_tenant(t text) RETURNS text LANGUAGE plpgsql AS $f$
	BEGIN
		RETURN set_config('review_state.tenant', t, false);
	END $f$;
	CREATE OR REPLACE FUNCTION public.review_state_set_role(r text) RETURNS text LANGUAGE plpgsql AS $f$
	BEGIN
		RETURN set_config('role', r, false);
	END $f$;
	CREATE OR REPLACE FUNCTION public.review_state_take_lock(k bigint) RETURNS void LANGUAGE plpgsql AS $f$
	BEGIN
		PERFORM pg_advisory_lock(k);
	END $f$;
	GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO `+appUser); err != nil {
		t.Fatalf("set up: %v", err)
	}
	catchUp(t, c)
}

var stateLeakAsserted = []string{
	"public.review_state_set_tenant(text)",
	"public.review_state_set_role(text)",
	"public.review_state_take_lock(bigint)",
}

// stateLeakStartOneStandby starts pgowl in front of the primary and one standby, one backend
// per node, with the functions above asserted read-only.
func stateLeakStartOneStandby(t *testing.T) *owl {
	t.Helper()
	c := sharedClusterFor(t)
	o := startOwlNoWait(t, c, func(cfg *config.Config) {
		cfg.Nodes = cfg.Nodes[:2]
		cfg.Pool.MaxPerNode = 1
		cfg.Pool.AcquireTimeout = 2 * time.Second
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
		cfg.Classify.Functions.Readonly = stateLeakAsserted
	})
	o.waitRoles(t, map[string]route.Role{c.Nodes[0].Name: route.RolePrimary, c.Nodes[1].Name: route.RoleStandby})
	return o
}

// TestSessionStateAssertedReadOnlyFunctionDoesNotLeak: a function asserted read-only changes
// session state (it writes nothing, so the assertion is true). The caller's state must not reach
// the other client that gets the same standby backend.
func TestSessionStateAssertedReadOnlyFunctionDoesNotLeak(t *testing.T) {
	stateLeakAssertedSetup(t)
	for _, tc := range []struct{ name, sql string }{
		{"Tenant", "SELECT public.review_state_set_tenant('tenant-a')"},
		{"Role", "SELECT public.review_state_set_role('review_state_role')"},
		{"Lock", "SELECT public.review_state_take_lock(7560)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := stateLeakStartOneStandby(t)
			ctx := timeoutCtx(t, statementTimeout)
			ac := o.connect(t, nil)
			a := ac.PgConn()
			r3pExecAll(t, ctx, a, tc.sql)
			t.Logf("A's %s ran on %v", tc.sql, ac.routes(t))
			// B reads on the standby (the probe of checkNoLeakedState reads node-local views,
			// which run on the primary).
			bc := o.connect(t, nil)
			b := bc.PgConn()
			got, err := rvQueryOne(ctx, b, "SELECT current_user || '/' || session_user || '|tenant=' || coalesce(current_setting('review_state.tenant', true), '')")
			if rvSQLState(err) == "53300" {
				t.Logf("B waited: A's pin holds the standby's backend")
				return
			}
			if err != nil {
				t.Fatalf("B: %v", err)
			}
			rs := bc.routes(t)
			locks, lerr := rvQueryOne(ctx, b, "/*pgowl:readonly*/ SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
			lrs := bc.routes(t)
			if got != "app/app|tenant=" || (lerr == nil && locks != "0") {
				t.Errorf("after A ran %s, B (on %v) sees %q and holds %s advisory locks (%v, on %v); want app/app|tenant= and 0", tc.sql, rs, got, locks, lerr, lrs)
			}
		})
	}
}

// TestSessionStateAssertedReadOnlyFunctionStateKept: the client that switched its tenant (or role)
// through a function asserted read-only keeps it for its next statement on the primary, as on a
// direct connection.
func TestSessionStateAssertedReadOnlyFunctionStateKept(t *testing.T) {
	stateLeakAssertedSetup(t)
	o := stateLeakStartOneStandby(t)
	for _, tc := range []struct{ name, change, read, want string }{
		{"Tenant", "SELECT public.review_state_set_tenant('tenant-a')",
			"/*pgowl:primary*/ SELECT coalesce(current_setting('review_state.tenant', true), '<unset>')", "tenant-a"},
		{"Role", "SELECT public.review_state_set_role('review_state_role')",
			"/*pgowl:primary*/ SELECT current_user::text", "review_state_role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := timeoutCtx(t, statementTimeout)
			conn := o.connect(t, nil)
			a := conn.PgConn()
			r3pExecAll(t, ctx, a, tc.change)
			changed := conn.routes(t)
			got, err := rvQueryOne(ctx, a, tc.read)
			read := conn.routes(t)
			if err != nil || got != tc.want {
				t.Errorf("after %s (ran on %v), A's %q answered %q, %v on %v; want %s, as on a direct connection",
					tc.change, changed, tc.read, got, err, read, tc.want)
			}
		})
	}
}
