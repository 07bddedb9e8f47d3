package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Markers carried as literals by the corpus; neither may reach a log line or
// SHOW pgowl.explain.
const (
	stringMarker  = "owlsecret7c1e"
	numericMarker = "86753091357"
)

// literalCorpus carries the markers in every position the grammar takes a
// literal: queries and DML, utility statements and DDL the normaliser leaves
// alone, SET values written as bare words, comments, function bodies, and
// input that does not parse. Statements may fail on the node (permissions,
// objects that do not exist): what they leave in the log counts all the same.
var literalCorpus = []string{
	"SELECT 'owlsecret7c1e'",
	"SELECT 86753091357",
	"SELECT 86753091357.5, -86753091357",
	"SELECT E'owlsecret7c1e', U&'owlsecret7c1e', $q$owlsecret7c1e$q$, 'owlsecret7c1e'::text, CAST('owlsecret7c1e' AS text)",
	"SELECT ARRAY['owlsecret7c1e'], ROW('owlsecret7c1e'), '{\"k\": \"owlsecret7c1e\"}'::jsonb",
	"SELECT * FROM lit_items WHERE v = 'owlsecret7c1e' OR id = 86753091357 LIMIT 86753091357",
	"SELECT v FROM lit_items WHERE v IN ('owlsecret7c1e', 'x') AND v LIKE 'owlsecret7c1e%'",
	"VALUES ('owlsecret7c1e')",
	"WITH w AS (SELECT 'owlsecret7c1e' AS c) SELECT * FROM w",
	"EXPLAIN SELECT 'owlsecret7c1e'",
	"INSERT INTO lit_items VALUES (1, 'owlsecret7c1e')",
	"INSERT INTO lit_items VALUES (1, 'a') ON CONFLICT DO NOTHING",
	"UPDATE lit_items SET v = 'owlsecret7c1e' WHERE id = 86753091357",
	"DELETE FROM lit_items WHERE v = 'owlsecret7c1e'",
	"PREPARE lit_p AS SELECT 'owlsecret7c1e'",
	"EXECUTE lit_p",
	"DEALLOCATE lit_p",
	"PREPARE lit_q(text) AS SELECT $1",
	"EXECUTE lit_q('owlsecret7c1e')",
	"DEALLOCATE lit_q",
	"CREATE TEMP TABLE lit_temp AS SELECT 'owlsecret7c1e' AS c",
	"CREATE TABLE lit_ctas AS SELECT 'owlsecret7c1e' AS c",
	"DROP TABLE lit_ctas",
	"CREATE VIEW lit_view AS SELECT 'owlsecret7c1e' AS c",
	"DROP VIEW lit_view",
	"CREATE TABLE lit_defaults (c text DEFAULT 'owlsecret7c1e' CHECK (c <> 'owlsecret7c1e'), n bigint DEFAULT 86753091357)",
	"ALTER TABLE lit_defaults ALTER COLUMN c SET DEFAULT 'owlsecret7c1e'",
	"CREATE INDEX lit_partial ON lit_defaults (c) WHERE c = 'owlsecret7c1e'",
	"DROP TABLE lit_defaults",
	"COMMENT ON TABLE lit_items IS 'owlsecret7c1e'",
	"ALTER SYSTEM SET work_mem = 'owlsecret7c1e'",
	"COPY lit_items FROM PROGRAM 'owlsecret7c1e'",
	"COPY (SELECT 'owlsecret7c1e') TO PROGRAM 'owlsecret7c1e'",
	"CREATE PROCEDURE lit_proc(x text) LANGUAGE sql AS $$ SELECT 'owlsecret7c1e' $$",
	"CALL lit_proc('owlsecret7c1e')",
	"DROP PROCEDURE lit_proc",
	"CREATE FUNCTION lit_fn() RETURNS text SET search_path = owlsecret7c1e LANGUAGE sql AS $$ SELECT 'owlsecret7c1e' $$",
	"DROP FUNCTION lit_fn",
	"DO $$ BEGIN PERFORM 'owlsecret7c1e'; END $$",
	"NOTIFY lit_channel, 'owlsecret7c1e'",
	"SELECT pg_notify('lit_channel', 'owlsecret7c1e')",
	"SELECT 1 /* owlsecret7c1e */",
	"SELECT 1 -- owlsecret7c1e\n",
	"/* owlsecret7c1e */ INSERT INTO lit_items VALUES (2, 'b')",
	"SET application_name = 'owlsecret7c1e'",
	"SET application_name = owlsecret7c1e",
	"SET search_path = public, owlsecret7c1e",
	"RESET search_path",
	"SET statement_timeout = 86753091357",
	"RESET statement_timeout",
	"SET TIME ZONE 'owlsecret7c1e'",
	"BEGIN; SET LOCAL work_mem = 'owlsecret7c1e'; COMMIT",
	"SELECT set_config('lit.setting', 'owlsecret7c1e', false)",
	"SELECT set_config('lit.owlsecret7c1e', 'x', false)",
	"SELECT current_setting('lit.owlsecret7c1e', true)",
	"SELECT nextval('owlsecret7c1e_seq')",
	"SELECT 'owlsecret7c1e'::regclass",
	"SELECT to_regclass('owlsecret7c1e')",
	"SELECT pg_advisory_xact_lock(86753091357)",
	"SELECT pg_notify('owlsecret7c1e', 'x')",
	"SELECT * FROM dblink('owlsecret7c1e', 'SELECT 1') AS t(x int)",
	"SELECT pg_read_file('owlsecret7c1e')",
	"SELECT pg_terminate_backend(86753091357)",
	"ALTER ROLE lit_nobody SET work_mem TO 'owlsecret7c1e'",
	"CREATE ROLE lit_nobody PASSWORD 'owlsecret7c1e'",
	"ALTER ROLE lit_nobody PASSWORD 'owlsecret7c1e'",
	"BEGIN; DECLARE lit_cursor CURSOR FOR SELECT 'owlsecret7c1e'; FETCH lit_cursor; COMMIT",
	"SELECT 'owlsecret7c1e' FROM",                          // does not parse
	"SELEC 'owlsecret7c1e'",                                // does not parse
	"SELECT 'owlsecret7c1e",                                // does not scan
	"SELECT 1; SELECT 'owlsecret7c1e'; SELECT 86753091357", // several statements
}

// TestNoLiteralReachesLogs runs the literal corpus through pgowl, with the
// simple and the extended protocol, and greps pgowl's whole log and every
// SHOW pgowl.explain answer for the markers.
func TestNoLiteralReachesLogs(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "lit_items", "CREATE TABLE lit_items (id bigint, v text)")
	conn := o.connect(t, nil)
	pg := conn.PgConn()
	ctx := timeoutCtx(t, 3*statementTimeout)

	explainOf := func(what string) {
		t.Helper()
		results, err := pg.Exec(ctx, "SHOW pgowl.explain").ReadAll()
		if err != nil {
			t.Fatalf("SHOW pgowl.explain after %q: %v", what, err)
		}
		for _, r := range results {
			for _, row := range r.Rows {
				for _, value := range row {
					if containsMarker(string(value)) {
						t.Errorf("SHOW pgowl.explain after %q carries a marker: %s", what, value)
					}
				}
			}
		}
	}
	failed := 0
	for _, sql := range literalCorpus {
		if _, err := pg.Exec(ctx, sql).ReadAll(); err != nil {
			failed++
			if pg.IsClosed() {
				t.Fatalf("%q closed the connection: %v", sql, err)
			}
		}
		explainOf(sql)
	}
	// The extended protocol: literals in the statement text, and values as parameters.
	for _, sql := range []string{"SELECT 'owlsecret7c1e', $1::text", "SELECT $1::bigint + 86753091357", "UPDATE lit_items SET v = $1 WHERE v = 'owlsecret7c1e'"} {
		value := stringMarker
		if strings.Contains(sql, "bigint") {
			value = numericMarker
		}
		if err := pg.ExecParams(ctx, sql, [][]byte{[]byte(value)}, nil, nil, nil).Read().Err; err != nil {
			failed++
		}
		explainOf(sql)
	}
	extended := o.connect(t, func(cfg *pgx.ConnConfig) { cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement })
	var echoed string
	if err := extended.QueryRow(ctx, "SELECT $1::text || 'owlsecret7c1e'", stringMarker).Scan(&echoed); err != nil {
		t.Errorf("prepared statement with a marker: %v", err)
	}
	t.Logf("%d corpus statements and %d extended ones ran; %d failed on the node (expected for some: permissions, bad input)",
		len(literalCorpus), 3, failed)

	conn.Close(context.Background())
	extended.Close(context.Background())
	logText := o.logs.String()
	routed := strings.Count(logText, `"message":"routed"`)
	if routed < len(literalCorpus) {
		t.Errorf("only %d routing-log lines for %d statements: the test does not see what it should", routed, len(literalCorpus))
	}
	for _, line := range strings.Split(logText, "\n") {
		if containsMarker(line) {
			t.Errorf("a marker reached pgowl's log: %s", line)
		}
	}
	t.Logf("searched %d log lines (%d routing lines) and %d SHOW pgowl.explain answers", strings.Count(logText, "\n"), routed, len(literalCorpus)+3)
}

// containsMarker reports either marker in s.
func containsMarker(s string) bool {
	return strings.Contains(s, stringMarker) || strings.Contains(s, numericMarker)
}
