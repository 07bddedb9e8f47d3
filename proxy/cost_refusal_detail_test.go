package proxy

import (
	"encoding/binary"
	"strings"
	"testing"
)

// explainHashJoin is EXPLAIN (FORMAT JSON, VERBOSE) output as PostgreSQL 15
// writes it, trimmed to the fields pgowl reads and a few it ignores.
const explainHashJoin = `[
  {
    "Plan": {
      "Node Type": "Hash Join",
      "Parallel Aware": false,
      "Join Type": "Inner",
      "Startup Cost": 30.5,
      "Total Cost": 20000.00,
      "Plan Rows": 1000000,
      "Output": ["b.id"],
      "Plans": [
        {
          "Node Type": "Seq Scan",
          "Parent Relationship": "Outer",
          "Relation Name": "big",
          "Schema": "public",
          "Alias": "b",
          "Total Cost": 18000.00,
          "Plan Rows": 1000000
        },
        {
          "Node Type": "Hash",
          "Parent Relationship": "Inner",
          "Total Cost": 30.00,
          "Plan Rows": 1000,
          "Plans": [
            {
              "Node Type": "Index Only Scan",
              "Relation Name": "my table",
              "Schema": "public",
              "Index Name": "small_pkey",
              "Total Cost": 25.00,
              "Plan Rows": 1000.4
            }
          ]
        }
      ]
    }
  }
]`

// TestCostRefusalDetailNamesThePlanNodes checks the DETAIL contract the
// client package parses: a first line with the guard, node, cost and limit,
// then the plan nodes by own cost (total minus the children's), quoted where
// a value holds a space.
func TestCostRefusalDetailNamesThePlanNodes(t *testing.T) {
	v, err := parseExplainJSON([]byte(explainHashJoin))
	if err != nil {
		t.Fatal(err)
	}
	if v.total != 20000 {
		t.Fatalf("total %v", v.total)
	}
	e := costRefusal("analytics", "pg2", 5000, v)
	if e.SQLState != "54001" || e.Message != "pgowl: QUERY_COST_EXCEEDED: estimated cost 20000 exceeds the limit 5000" {
		t.Fatalf("message %q (%s)", e.Message, e.SQLState)
	}
	want := strings.Join([]string{
		"guard=analytics node=pg2 estimated_cost=20000.00 limit=5000.00",
		`plan_node="Seq Scan" relation=public.big index=- rows=1000000 own_cost=18000.00 share_pct=90.0`,
		`plan_node="Hash Join" relation=- index=- rows=1000000 own_cost=1970.00 share_pct=9.8`,
		`plan_node="Index Only Scan" relation="public.my table" index=small_pkey rows=1000 own_cost=25.00 share_pct=0.1`,
		`plan_node=Hash relation=- index=- rows=1000 own_cost=5.00 share_pct=0.0`,
	}, "\n")
	if e.Detail != want {
		t.Fatalf("detail:\n%s\nwant:\n%s", e.Detail, want)
	}
	if !strings.Contains(e.Hint, "Retrying the same SQL fails again") {
		t.Fatalf("hint %q", e.Hint)
	}
}

// TestCostRefusalDetailKeepsFiveNodes checks that at most five plan nodes are named.
func TestCostRefusalDetailKeepsFiveNodes(t *testing.T) {
	var b strings.Builder
	b.WriteString(`[{"Plan": {"Node Type": "Append", "Total Cost": 700, "Plan Rows": 7, "Plans": [`)
	for i := 0; i < 7; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"Node Type": "Seq Scan", "Relation Name": "t", "Schema": "s", "Total Cost": 90, "Plan Rows": 1}`)
	}
	b.WriteString(`]}}]`)
	v, err := parseExplainJSON([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(v.detail("g", "n", 1), "\n"); len(lines) != 1+maxCostNodes {
		t.Fatalf("%d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// TestExplainableStatements checks which statements are explained: queries
// and DML after comments, not utility statements.
func TestExplainableStatements(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT 1": true, "/* owlai */ select * from t": true, "-- x\n  WITH a AS (SELECT 1) SELECT * FROM a": true,
		"/* a /* nested */ */ VALUES (1)": true, "table t": true, "insert into t values (1)": true,
		"SET x = 1": false, "SHOW all": false, "BEGIN": false, "explain select 1": false, "": false, "/* open": false,
	} {
		if got := explainable(sql); got != want {
			t.Errorf("explainable(%q) = %v, want %v", sql, got, want)
		}
	}
}

// TestExplainBindKeepsParametersAsksText checks that the Bind pgowl sends
// with EXPLAIN carries the client's parameter formats and values, for the
// unnamed portal and statement, and asks for text results.
func TestExplainBindKeepsParametersAsksText(t *testing.T) {
	var params []byte
	params = binary.BigEndian.AppendUint16(params, 1)
	params = binary.BigEndian.AppendUint16(params, 1) // binary
	params = binary.BigEndian.AppendUint16(params, 2)
	params = binary.BigEndian.AppendUint32(params, 4)
	params = append(params, 0, 0, 0, 7)
	params = binary.BigEndian.AppendUint32(params, 0xFFFFFFFF) // NULL
	client := append(append([]byte{}, params...), 0, 1, 0, 1)  // one binary result format
	bind, err := explainBind(client)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{0, 0}, params...), 0, 0)
	if string(bind) != string(want) {
		t.Fatalf("bind %v, want %v", bind, want)
	}
	if _, err := explainBind(params[:7]); err == nil {
		t.Fatal("a short Bind was accepted")
	}
}
