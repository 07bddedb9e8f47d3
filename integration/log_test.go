package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// routedFields are the fields every routing-log line carries.
var routedFields = []string{
	"conn_id", "user", "database", "application_name", "client_addr",
	"node", "role", "reason", "lag_ms", "duration_ms", "outcome",
	"fingerprint", "statement",
}

// TestRoutingLog checks the routing log: one "routed" line per unit with
// every field, normalised statements that never hold literals, the same
// fingerprint for statements that differ only in literals, the SQLSTATE as
// outcome of a failed unit, and ai=true for statements marked /* owlai */.
func TestRoutingLog(t *testing.T) {
	c := sharedClusterFor(t)
	// read_your_writes off: this test reads on a standby right after a write in
	// the same session to check the log line, not read your writes (read_your_writes_test.go).
	o := startOwl(t, c, readYourWritesOff)
	createTable(t, c, "t13_items", "CREATE TABLE t13_items (id int, v text)")
	const app = "t13-logcheck"
	conn := o.connect(t, func(cfg *pgx.ConnConfig) {
		cfg.RuntimeParams["application_name"] = app
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	})
	ctx := timeoutCtx(t, statementTimeout)

	statements := []struct {
		sql, role, reason, outcome string
		ai                         bool
	}{
		{"SELECT count(*) FROM t13_items WHERE v = 'secret-literal-123'", "standby", "READ_ONLY", "ok", false},
		{"SELECT count(*) FROM t13_items WHERE v = 'other-literal-456'", "standby", "READ_ONLY", "ok", false},
		{"INSERT INTO t13_items VALUES (1, 'secret-literal-789')", "primary", "WRITE", "ok", false},
		{"/* owlai */ SELECT count(*) FROM t13_items", "standby", "READ_ONLY", "ok", true},
		{"SELECT 1 / (SELECT count(*) - count(*) FROM t13_items)", "standby", "READ_ONLY", "22012", false},
	}
	for _, s := range statements {
		_, err := conn.Exec(ctx, s.sql)
		if (err == nil) != (s.outcome == "ok") {
			t.Fatalf("%s: error %v, want outcome %s", s.sql, err, s.outcome)
		}
	}
	conn.routes(t)

	var lines []map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines = lines[:0]
		for _, e := range o.logs.Entries(t) {
			if e[zerolog.MessageFieldName] == "routed" && e["application_name"] == app {
				lines = append(lines, e)
			}
		}
		if len(lines) >= len(statements) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(lines) != len(statements) {
		t.Fatalf("found %d routing-log lines for application_name %s, want %d (one per routed unit)", len(lines), app, len(statements))
	}

	var missingAI []string
	for i, s := range statements {
		line := lines[i]
		for _, field := range routedFields {
			if _, ok := line[field]; !ok {
				t.Errorf("line for %q lacks field %q: %v", s.sql, field, line)
			}
		}
		wantFields := map[string]any{"user": appUser, "database": appDatabase, "role": s.role, "reason": s.reason, "outcome": s.outcome}
		for field, want := range wantFields {
			if line[field] != want {
				t.Errorf("line for %q: %s = %v, want %v", s.sql, field, line[field], want)
			}
		}
		switch ai, ok := line["ai"]; {
		case ok && ai != s.ai:
			t.Errorf("line for %q: ai = %v, want %v", s.sql, ai, s.ai)
		case !ok && s.ai:
			t.Errorf("line for %q: no ai field, want ai=true", s.sql)
		case !ok:
			// The field list of a routing-log line includes ai; a line
			// for an unmarked statement should say ai=false.
			missingAI = append(missingAI, s.sql)
		}
		for _, field := range []string{"conn_id", "lag_ms", "duration_ms"} {
			if v, ok := line[field].(float64); !ok || v < 0 {
				t.Errorf("line for %q: %s = %v, want a non-negative number", s.sql, field, line[field])
			}
		}
		if addr, _ := line["client_addr"].(string); !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf("line for %q: client_addr = %v, want 127.0.0.1:<port>", s.sql, line["client_addr"])
		}
		if node, _ := line["node"].(string); c.Node(node) == nil {
			t.Errorf("line for %q: node = %v, not a cluster node", s.sql, line["node"])
		}
		if st, _ := line["statement"].(string); st == "" {
			t.Errorf("line for %q: empty statement", s.sql)
		}
		if fp, _ := line["fingerprint"].(string); fp == "" {
			t.Errorf("line for %q: empty fingerprint", s.sql)
		}
		if line["conn_id"] != lines[0]["conn_id"] {
			t.Errorf("line for %q: conn_id %v differs from the connection's first line %v", s.sql, line["conn_id"], lines[0]["conn_id"])
		}
	}
	if len(missingAI) > 0 {
		t.Errorf("routing-log lines lack the ai field (want ai=false) for %d unmarked statement(s): %q", len(missingAI), missingAI)
	}
	if lines[0]["fingerprint"] != lines[1]["fingerprint"] || lines[0]["statement"] != lines[1]["statement"] {
		t.Errorf("statements differing only in a literal have different fingerprints or statements: %v / %v and %v / %v",
			lines[0]["fingerprint"], lines[0]["statement"], lines[1]["fingerprint"], lines[1]["statement"])
	}
	if lines[0]["fingerprint"] == lines[2]["fingerprint"] {
		t.Errorf("a SELECT and an INSERT share fingerprint %v", lines[0]["fingerprint"])
	}
	all := o.logs.String()
	for _, literal := range []string{"secret-literal-123", "other-literal-456", "secret-literal-789"} {
		if strings.Contains(all, literal) {
			t.Errorf("the log contains the literal %q", literal)
		}
	}
}
