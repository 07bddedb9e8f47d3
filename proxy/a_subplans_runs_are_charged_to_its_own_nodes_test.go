package proxy

import "testing"

// TestASubPlansRunsAreChargedToItsOwnNodes: EXPLAIN shows a correlated subquery (a SubPlan) with the
// cost of one run, and charges all its runs to the node it is evaluated in. The refusal must name
// the subquery's scan, run once per row, as the costly node, not the scan of the 50 rows it runs for.
func TestASubPlansRunsAreChargedToItsOwnNodes(t *testing.T) {
	plan := `[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "small", "Schema": "public", "Plan Rows": 50, "Total Cost": 89552.11,
		"Plans": [{"Node Type": "Aggregate", "Parent Relationship": "SubPlan", "Plan Rows": 1, "Total Cost": 1791.00,
			"Plans": [{"Node Type": "Seq Scan", "Relation Name": "big", "Schema": "public", "Parent Relationship": "Outer", "Plan Rows": 1, "Total Cost": 1790.00}]}]}}]`
	v, err := parseExplainJSON([]byte(plan))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.nodes) == 0 || v.nodes[0].Relation != "public.big" {
		t.Fatalf("costliest node %+v, want the scan of public.big the subquery runs 50 times; all: %+v", v.nodes[0], v.nodes)
	}
	var sum float64
	for _, n := range v.nodes {
		sum += n.OwnCost
	}
	if sum < v.total*0.99 || sum > v.total*1.01 {
		t.Errorf("own costs add up to %.2f, the plan's total is %.2f: each run is charged once", sum, v.total)
	}
	for _, n := range v.nodes {
		if n.Relation == "public.small" && n.SharePct > 1 {
			t.Errorf("the scan of the 50-row table keeps %.1f%% of the cost; the subquery's runs are its own", n.SharePct)
		}
	}
	// Without a SubPlan, own cost stays the node's total minus its children's.
	plain := `[{"Plan": {"Node Type": "Aggregate", "Plan Rows": 1, "Total Cost": 100, "Plans": [{"Node Type": "Seq Scan", "Relation Name": "big", "Plan Rows": 1000, "Total Cost": 90}]}}]`
	v, err = parseExplainJSON([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	if v.nodes[0].OwnCost != 90 || v.nodes[1].OwnCost != 10 {
		t.Errorf("own costs %+v, want 90 for the scan and 10 for the aggregate", v.nodes)
	}
}
