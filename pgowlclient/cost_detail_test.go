package pgowlclient

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCostDetail(t *testing.T) {
	detail := strings.Join([]string{
		`guard=reports node=pg2 estimated_cost=182340.5 limit=50000`,
		`plan_node="Seq Scan" relation=public.big index=- rows=1000000 own_cost=180000.00 share_pct=98.7`,
		`plan_node="Index Scan" relation="public.\"odd name\"" index=big_pkey rows=1 own_cost=8.44 share_pct=0.0 loops=3`,
		`plan_node=Sort relation=- index=- rows=1000000 own_cost=2331.5 share_pct=1.3`,
	}, "\n")
	got, err := ParseCostDetail(detail)
	if err != nil {
		t.Fatal(err)
	}
	want := &CostExceeded{
		Guard: "reports", Node: "pg2", EstimatedCost: 182340.5, Limit: 50000,
		PlanNodes: []PlanNode{
			{NodeType: "Seq Scan", Relation: "public.big", Rows: 1000000, OwnCost: 180000, SharePct: 98.7},
			{NodeType: "Index Scan", Relation: `public."odd name"`, Index: "big_pkey", Rows: 1, OwnCost: 8.44, SharePct: 0, Extra: map[string]string{"loops": "3"}},
			{NodeType: "Sort", Rows: 1000000, OwnCost: 2331.5, SharePct: 1.3},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseCostDetailAcceptsAddedFirstLineFieldsAndATrailingNewline(t *testing.T) {
	got, err := ParseCostDetail("guard=g node=pg1 estimated_cost=10 limit=5 plan_ms=3\n")
	if err != nil {
		t.Fatal(err)
	}
	if got.Guard != "g" || got.Limit != 5 || len(got.PlanNodes) != 0 {
		t.Errorf("got %+v", got)
	}
}

func TestParseCostDetailRejectsWhatBreaksTheContract(t *testing.T) {
	for name, detail := range map[string]string{
		"empty":              "",
		"words":              "the plan is too expensive",
		"missing limit":      "guard=g node=pg1 estimated_cost=10",
		"cost not a number":  "guard=g node=pg1 estimated_cost=lots limit=5",
		"node line too thin": "guard=g node=pg1 estimated_cost=10 limit=5\nplan_node=Sort",
		"rows not integer":   "guard=g node=pg1 estimated_cost=10 limit=5\nplan_node=Sort relation=- index=- rows=1.5 own_cost=1 share_pct=1",
		"unterminated quote": "guard=g node=pg1 estimated_cost=10 limit=5\nplan_node=\"Seq Scan relation=- index=- rows=1 own_cost=1 share_pct=1",
		"duplicate key":      "guard=g guard=h node=pg1 estimated_cost=10 limit=5",
		"bare word":          "guard=g node=pg1 estimated_cost=10 limit=5\nSeq Scan on big",
	} {
		if got, err := ParseCostDetail(detail); err == nil {
			t.Errorf("%s: parsed %q as %+v, want an error", name, detail, got)
		}
	}
}

// FuzzParseCostDetail checks that no DETAIL makes the parser panic, and that
// what it accepts has the fields the contract requires.
func FuzzParseCostDetail(f *testing.F) {
	f.Add("guard=reports node=pg2 estimated_cost=182340 limit=50000\nplan_node=\"Seq Scan\" relation=public.big index=- rows=1000000 own_cost=180000.00 share_pct=98.7")
	f.Add("guard=\"a b\" node=pg1 estimated_cost=1e9 limit=0\n")
	f.Add("guard=g node=pg1 estimated_cost=10 limit=5\nplan_node=\"\\\"\" relation=- index=- rows=0 own_cost=0 share_pct=0")
	f.Fuzz(func(t *testing.T, detail string) {
		c, err := ParseCostDetail(detail)
		if err != nil {
			return
		}
		for _, n := range c.PlanNodes {
			if n.NodeType == "" {
				t.Errorf("accepted a plan node without a type: %q", detail)
			}
		}
	})
}
