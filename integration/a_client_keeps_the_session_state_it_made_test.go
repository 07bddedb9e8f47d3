package integration

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestSessionStateStartupOptionsStayWithTheirClient: a client's startup options (a custom setting
// given with -c, and application_name) are its own: a client without them, given the same
// (only) backend slot, does not see them, and the client keeps them afterwards.
func TestSessionStateStartupOptionsStayWithTheirClient(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, withParams(map[string]string{"options": "-c review_state.tenant=from-startup", "application_name": "review-a"})).PgConn()
	b := o.connect(t, nil).PgConn()
	const probe = `SELECT coalesce(current_setting('review_state.tenant', true), '') || '|' ||
		current_setting('application_name') || '|' ||
		(SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid())`
	for i := 0; i < 2; i++ {
		got, err := rvQueryOne(ctx, a, probe)
		if err != nil {
			t.Fatalf("A: %v", err)
		}
		if got != "from-startup|review-a|review-a" {
			t.Errorf("A (round %d) sees %q, want from-startup|review-a|review-a", i, got)
		}
		got, err = rvQueryOne(ctx, b, probe)
		if err != nil {
			t.Fatalf("B: %v", err)
		}
		if got != "||" {
			t.Errorf("B (round %d) sees %q, want || (no tenant, no application_name)", i, got)
		}
	}
}

// TestSessionStateTempTableUsedByPreparedStatements: a client that made a temporary table uses it
// through the extended protocol (pgx's statement cache prepares first: Parse/Describe/Sync, then
// Bind/Execute), while another client holds the primary's other backend in a transaction. The
// prepare must reach the backend that holds the table, as the statements after it do.
func TestSessionStateTempTableUsedByPreparedStatements(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Pool.MaxPerNode = 2
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	other := o.connect(t, nil)
	if _, err := a.Exec(ctx, "CREATE TEMP TABLE review_state_pt (id int)", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "BEGIN; SELECT txid_current()", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	defer other.Exec(context.Background(), "ROLLBACK", pgx.QueryExecModeSimpleProtocol)
	for _, sql := range []string{
		"INSERT INTO review_state_pt VALUES ($1)",
		"SELECT count(*) FROM review_state_pt WHERE id = $1",
		"SELECT count(*) FROM pg_temp.review_state_pt WHERE id > $1",
	} {
		rows, err := a.Query(ctx, sql, 1)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			t.Errorf("A's %q on its own temporary table: %v (routes %v); a direct connection runs it", sql, err, a.routes(t))
		}
	}
	// Prepared with a new statement cache entry while the other client's transaction ends.
	if _, err := other.Exec(ctx, "COMMIT", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := a.QueryRow(ctx, "SELECT count(*) FROM review_state_pt WHERE id <> $1", 2).Scan(&n); err != nil || n != 1 {
		t.Errorf("A's temporary table after the other client's COMMIT: %d rows, %v; want 1", n, err)
	}
}

// TestSessionStateStartupGUCParametersStayWithTheirClient: settings given as startup parameters of
// their own (not inside options) are the client's: another client given the same (only) backend
// slot does not see them, and the client keeps them.
func TestSessionStateStartupGUCParametersStayWithTheirClient(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, withParams(map[string]string{"search_path": "pg_catalog", "review_state.tenant": "startup-a", "DateStyle": "SQL, DMY"})).PgConn()
	b := o.connect(t, nil).PgConn()
	const probe = `SELECT current_setting('search_path') || '|' || coalesce(current_setting('review_state.tenant', true), '') || '|' || current_setting('DateStyle')`
	for i := 0; i < 2; i++ {
		got, err := rvQueryOne(ctx, a, probe)
		if err != nil {
			t.Fatalf("A: %v", err)
		}
		if got != "pg_catalog|startup-a|SQL, DMY" {
			t.Errorf("A (round %d) sees %q, want pg_catalog|startup-a|SQL, DMY", i, got)
		}
		got, err = rvQueryOne(ctx, b, probe)
		if err != nil {
			t.Fatalf("B: %v", err)
		}
		if got != `"$user", public||ISO, MDY` {
			t.Errorf("B (round %d) sees %q, want \"$user\", public||ISO, MDY", i, got)
		}
	}
}

// TestSessionStatePinnedSessionKeepsItsSettings: a session pinned to its backend (a temporary
// table) never moves, so a setting it makes in a way pgowl cannot replay (a computed name, a DO
// block, a function running dynamic SQL) stays in force for its next statements on that
// backend, as on a direct connection.
func TestSessionStatePinnedSessionKeepsItsSettings(t *testing.T) {
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	o := startOwl(t, c, readYourWritesOff)
	for _, tc := range []struct{ name, change string }{
		{"ComputedName", "SELECT set_config('review_state.' || 'tenant', 'tenant-a', false)"},
		{"DoBlock", "DO $$ BEGIN PERFORM set_config('review_state.tenant', 'tenant-a', false); END $$"},
		{"DoBlockComputedName", "DO $$ BEGIN PERFORM set_config('review_state.' || 'tenant', 'tenant-a', false); END $$"},
		{"FunctionDynamicSQL", "SELECT public.review_state_tenant('tenant-a')"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := timeoutCtx(t, statementTimeout)
			conn := o.connect(t, nil)
			a := conn.PgConn()
			r3pExecAll(t, ctx, a, "CREATE TEMP TABLE review_state_pin (id int)", tc.change)
			conn.routes(t)
			for i := 0; i < 2; i++ {
				got, err := rvQueryOne(ctx, a, "SELECT coalesce(current_setting('review_state.tenant', true), '<unset>') || ' pid=' || pg_backend_pid() || ' temp=' || (SELECT count(*) FROM pg_class WHERE relname = 'review_state_pin' AND relnamespace = pg_my_temp_schema())")
				rs := conn.routes(t)
				if err != nil || len(got) < 8 || got[:8] != "tenant-a" {
					t.Errorf("read %d after %s in a session pinned by its temporary table: %q, %v (routes %v); want tenant-a, as on a direct connection", i, tc.change, got, err, rs)
				}
			}
		})
	}
}
