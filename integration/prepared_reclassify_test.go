package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestPreparedStatementFollowsFunctionChange: a statement prepared while the
// function it calls only read keeps running, through the same prepared
// statement, after the function was replaced by one that writes. pgowl
// classifies a prepared statement again each time it is bound, so once the
// catalogue has reloaded the statement goes to the primary instead of
// failing on a standby.
func TestPreparedStatementFollowsFunctionChange(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 200 * time.Millisecond
	})
	createTable(t, c, "t_prep_log", "CREATE TABLE t_prep_log (n int)")
	ctx := timeoutCtx(t, time.Minute)
	define := func(body string) {
		t.Helper()
		sql := "SET ROLE " + appUser + "; CREATE OR REPLACE FUNCTION prep_fn() RETURNS int LANGUAGE sql VOLATILE AS $$ " + body + " $$"
		if err := c.Nodes[0].Exec(ctx, sql); err != nil {
			t.Fatalf("define prep_fn: %v", err)
		}
		catchUp(t, c)
	}
	define("SELECT count(*)::int FROM t_prep_log")
	time.Sleep(500 * time.Millisecond) // the catalogue reloads with the function

	conn := o.connect(t, nil) // pgx prepares the statement once and reuses it
	var n int
	if err := conn.QueryRow(ctx, "SELECT prep_fn() WHERE $1::int = 1", 1).Scan(&n); err != nil {
		t.Fatal(err)
	}
	wantRoute(t, "prepared call of a reading function", conn.oneRoute(t, "read"), "standby", "")

	define("INSERT INTO t_prep_log VALUES (1) RETURNING 1")
	// Wait until pgowl's catalogue knows: a fresh statement on another
	// connection goes to the primary.
	probe := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := probe.Exec(ctx, "SELECT prep_fn()")
		if r := probe.oneRoute(t, "probe"); err == nil && r.Role == "primary" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15s after prep_fn began to write, pgowl still routes a fresh call to a standby")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The statement prepared before the change runs on the primary at once.
	if err := conn.QueryRow(ctx, "SELECT prep_fn() WHERE $1::int = 1", 1).Scan(&n); err != nil {
		t.Fatalf("the prepared statement after the change: %v", err)
	}
	wantRoute(t, "prepared call after the function began to write", conn.oneRoute(t, "write"), "primary", "WRITING_FUNCTION")
	if got := primaryInt(t, c, "SELECT count(*) FROM t_prep_log"); got < 1 {
		t.Errorf("the write through the prepared statement did not reach the primary")
	}
}
