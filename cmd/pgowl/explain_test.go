package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

func TestExplainWithoutCatalogue(t *testing.T) {
	var out bytes.Buffer
	if err := runExplain(context.Background(), &out, "/*pgowl:readonly*/ SELECT report()", explainOptions{maxDepth: 16}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"runs on:    a standby", "reason:     HINT", "warning:    the /*pgowl:readonly*/ hint overrides UNKNOWN_EFFECT", "catalogue-free"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runExplain(context.Background(), &out, "SELECT * FROM pg_locks", explainOptions{maxDepth: 16, asJSON: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"reason": "NODE_LOCAL_STATS"`) {
		t.Errorf("JSON output:\n%s", out.String())
	}
	if err := runExplain(context.Background(), &out, "SELECT 1", explainOptions{paramTypes: "x"}); err == nil {
		t.Error("a bad --param-types was accepted")
	}
}

// TestExplainWithCatalogue loads a real database's catalogue and prints the chain of functions.
func TestExplainWithCatalogue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := cluster.StartForTest(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary := c.Nodes[0]
	if err := primary.Exec(ctx, `CREATE TABLE audit (msg text);
CREATE FUNCTION audit_log(msg text) RETURNS void LANGUAGE plpgsql AS $$ BEGIN INSERT INTO audit VALUES (msg); END $$;
CREATE FUNCTION f_report() RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN PERFORM audit_log('report'); RETURN (SELECT count(*) FROM audit); END $$;
CREATE FUNCTION quiet() RETURNS int LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'SELECT 1'; RETURN 1; END $$`); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opts := explainOptions{dsn: primary.SuperuserDSN(), maxDepth: 16, timeout: 30 * time.Second}
	if err := runExplain(ctx, &out, "SELECT f_report()", opts); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"runs on:    the primary", "reason:     WRITING_FUNCTION",
		"chain:      f_report() → audit_log(text) writes: INSERT INTO audit", "database postgres"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	opts.readonly = []string{"quiet()"}
	if err := runExplain(ctx, &out, "SELECT quiet()", opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "reason:     OVERRIDE") || !strings.Contains(out.String(), "quiet() asserted read-only by classify.functions.readonly") {
		t.Errorf("--readonly output:\n%s", out.String())
	}
}
