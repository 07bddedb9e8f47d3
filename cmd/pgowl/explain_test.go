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

	// --max-cost: the guard's verdict with the plan nodes.
	if err := primary.Exec(ctx, `CREATE TABLE big (id int PRIMARY KEY, v text);
INSERT INTO big SELECT g, 'v' || g FROM generate_series(1, 50000) g; ANALYZE big`); err != nil {
		t.Fatal(err)
	}
	opts = explainOptions{dsn: primary.SuperuserDSN(), maxDepth: 16, timeout: 30 * time.Second, maxCost: 100, guard: "analytics"}
	for sql, want := range map[string][]string{
		"SELECT count(*) FROM big WHERE v LIKE '%7%'": {"guard:      verdict=refused: pgowl: QUERY_COST_EXCEEDED: estimated cost ",
			" exceeds the limit 100 (SQLSTATE 54001)", "guard=analytics node=", " limit=100.00", `plan_node="Seq Scan" relation=public.big index=- rows=`},
		"SELECT v FROM big WHERE id = 7": {"guard:      verdict=ok", `plan_node="Index Scan" relation=public.big index=big_pkey rows=1 `},
	} {
		out.Reset()
		if err := runExplain(ctx, &out, sql, opts); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s --max-cost 100: output lacks %q:\n%s", sql, w, out.String())
			}
		}
	}
}
