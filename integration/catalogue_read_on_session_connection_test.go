package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// The catalogue change a session makes is read on the session's own connection, right behind the
// statement that made it (classify/catalog SessionRead). These tests show that the session's next
// statement is classified with the change in both protocols, under session settings that would
// change how the read's text comes back (client_encoding, search_path), and that the read leaves
// those settings as the session set them.

const csrSetupSQL = `
CREATE SCHEMA IF NOT EXISTS csr_app AUTHORIZATION app;
CREATE SEQUENCE IF NOT EXISTS csr_app.csr_seq;
ALTER SEQUENCE csr_app.csr_seq OWNER TO app;
`

func TestCatalogueChangeIsReadOnTheSessionConnection(t *testing.T) {
	_, o := setupAndStart(t, "session read objects", csrSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
		// The test reads right after a statement ran on the primary to check its classification.
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	for _, mode := range []struct {
		name string
		mode pgx.QueryExecMode
		// encoding is the session's client_encoding (pgx's simple protocol requires UTF8).
		encoding string
	}{{"simple", pgx.QueryExecModeSimpleProtocol, "UTF8"}, {"extended", pgx.QueryExecModeCacheStatement, "LATIN1"}} {
		t.Run(mode.name, func(t *testing.T) {
			conn := o.connect(t, withMode(mode.mode))
			conn.routes(t)
			r4rMust(t, conn, "SET search_path = csr_app, public")
			r4rMust(t, conn, "SET client_encoding = '"+mode.encoding+"'")
			// The changes and the statements that use them go in the subtest's protocol:
			// runToEnd keeps the connection's mode (r4rMust and runOnPrimary, like pgx's Exec
			// without arguments, send a simple Query in every mode).
			inMode := func(sql string) ([]routeNotice, error) {
				t.Helper()
				err := runToEnd(timeoutCtx(t, statementTimeout), conn, sql)
				return conn.routes(t), err
			}
			function := "csr_f_" + mode.name
			for round := 0; round < 3; round++ {
				// A function that writes, with a comment outside ASCII in its body: the next
				// statement must go to the primary, whatever the catalogue held before. Its SET
				// clause makes it a change the session reads (proconfig is not taken from the
				// statement).
				change := "CREATE OR REPLACE FUNCTION " + function + `() RETURNS bigint LANGUAGE sql VOLATILE
  SET work_mem = '4MB' AS $$SELECT nextval('csr_app.csr_seq') -- écrit$$`
				if rs, err := inMode(change); err != nil {
					t.Fatalf("%s: %v (routes %v)", change, err, rs)
				}
				use := "SELECT " + function + "()"
				if rs, err := inMode(use); err != nil {
					t.Errorf("%s: %v (routes %v); it works on the primary", use, err, rs)
				} else {
					for _, r := range rs {
						if r.Role != "primary" {
							t.Errorf("%s: ran on %v, want the primary", use, r)
						}
					}
				}
				// The same function made to read, without a SET clause: taken from its
				// statement, without a read. A standby may run the next call before it
				// replayed the change (read_your_writes is off), so only the round trip is
				// required: where a call must not run is checked above.
				change = "CREATE OR REPLACE FUNCTION " + function + `() RETURNS bigint LANGUAGE sql STABLE
  AS $$SELECT 1::bigint -- lit$$`
				if rs, err := inMode(change); err != nil {
					t.Fatalf("%s: %v (routes %v)", change, err, rs)
				}
				inMode(use) //nolint:errcheck // see above
			}
			for _, setting := range []struct{ name, want string }{
				{"search_path", "csr_app, public"},
				{"client_encoding", mode.encoding},
				{"plan_cache_mode", "auto"},
			} {
				got, err := r4rRows(t, conn, "SHOW "+setting.name)
				if err != nil || got != setting.want {
					t.Errorf("SHOW %s after the changes = %q, %v; want %q (the read sets it only for its own transaction)", setting.name, got, err, setting.want)
				}
			}
			// The read ran on this session's connection to the primary: its statements are
			// prepared there (a temporary table keeps the session on that connection).
			r4rMust(t, conn, "CREATE TEMP TABLE csr_seen AS SELECT name FROM pg_catalog.pg_prepared_statements WHERE name LIKE 'pgowl.catalogue.%'")
			got, err := r4rRows(t, conn, "SELECT string_agg(name, ',' ORDER BY name) FROM csr_seen")
			if err != nil || !strings.Contains(got, "pgowl.catalogue.functions") {
				t.Errorf("statements of the session read on the session's connection: %q, %v; want pgowl.catalogue.functions among them", got, err)
			}
		})
	}
}
