package integration

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// A function whose body reads a view that is not there yet is classified as unknown (the
// primary), and that analysis is memoised. Creating the view through pgowl carries the memoised
// analyses that never named it into the next catalogue (classify Catalogue.KeepAnalysesFrom), but
// not that one: the next call is classified with the view and goes to a standby as a read.

const avaSetupSQL = `
CREATE SCHEMA IF NOT EXISTS ava_app AUTHORIZATION app;
DROP VIEW IF EXISTS ava_app.ava_later;
CREATE OR REPLACE FUNCTION ava_app.ava_reads_later() RETURNS bigint LANGUAGE plpgsql VOLATILE
  AS $$ BEGIN RETURN (SELECT count(*) FROM ava_app.ava_later); END $$;
CREATE OR REPLACE FUNCTION ava_app.ava_other() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT 1::bigint';
`

func TestRoutingFollowsAViewAddedAfterAFunctionReadItInVain(t *testing.T) {
	c, o := setupAndStart(t, "views added after use", avaSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
		// The verdict is what is checked, on a standby that may not have replayed the view yet.
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	conn := rvConnect(t, o)
	call := func(sql string) routeNotice {
		t.Helper()
		conn.PgConn().Exec(timeoutCtx(t, statementTimeout), sql).ReadAll() //nolint:errcheck // the route is what is checked
		return conn.oneRoute(t, sql)
	}
	if r := call("SELECT ava_app.ava_reads_later()"); r.Role != "primary" || r.Reason != "UNKNOWN_EFFECT" {
		t.Fatalf("before the view exists: %v, want the primary with UNKNOWN_EFFECT (the relation is not in the catalogue)", r)
	}
	if r := call("SELECT ava_app.ava_other()"); r.Role != "standby" {
		t.Fatalf("an unrelated function: %v, want a standby", r)
	}
	r4rMust(t, conn, "CREATE VIEW ava_app.ava_later AS SELECT 1 AS n")
	// The session's own CREATE VIEW is read-your-writes even with read_your_writes off: once the
	// standbys have it, the reads below go there on their verdicts.
	catchUp(t, c)
	if r := call("SELECT ava_app.ava_reads_later()"); r.Role != "standby" || r.Reason != "READ_ONLY" {
		t.Errorf("after CREATE VIEW through pgowl: %v, want a standby with READ_ONLY (the analysis made without the view must not be kept)", r)
	}
	if r := call("SELECT ava_app.ava_other()"); r.Role != "standby" {
		t.Errorf("the unrelated function after CREATE VIEW: %v, want a standby", r)
	}
}
