package integration

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// noticeCost reads the cost a guarded statement's NOTICE reports.
var noticeCost = regexp.MustCompile(` cost=([0-9]+\.[0-9]{2})$`)

// TestGuardCostJudgesTheCustomPlanUnderForceGenericPlan reports a known gap.
// pgowl explains a prepared statement with an unnamed Parse of EXPLAIN and
// the client's own Bind values: the planner makes the custom plan for those
// values. A session with plan_cache_mode = force_generic_plan (and, in the
// default auto mode, a named statement the node has switched to its generic
// plan after five runs) runs the generic plan instead, whose estimate knows
// no values. For `id < $1` the custom plan for 10 is an index range scan
// under the limit, while the generic plan assumes a third of the table: the
// statement runs, judged by a plan the node does not use. The test checks
// both costs on the node, so it fails, and must change, when pgowl starts
// judging the plan the node runs (EXPLAIN EXECUTE of a managed statement
// with the session's plan_cache_mode would).
func TestGuardCostJudgesTheCustomPlanUnderForceGenericPlan(t *testing.T) {
	o, ai := startCostGuardOwl(t)
	conn := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	ctx := timeoutCtx(t, statementTimeout)
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	conn.routes(t)
	sql := "SELECT count(*) FROM guard_big WHERE id < $1"
	var n int64
	err := conn.QueryRow(ctx, ai(sql), 10).Scan(&n)
	if err != nil {
		t.Fatalf("id < 10 under force_generic_plan: %v (pgowl judges the custom plan, which is under the limit)", err)
	}
	r := conn.oneRoute(t, "id < 10 under force_generic_plan")
	if r.Raw == nil {
		return
	}
	m := noticeCost.FindStringSubmatch(r.Raw.Detail)
	if m == nil {
		t.Fatalf("NOTICE DETAIL %q has no cost", r.Raw.Detail)
	}
	judged, _ := strconv.ParseFloat(m[1], 64)

	var node = o.nodes.Nodes[0]
	for _, nd := range o.nodes.Nodes {
		if nd.Name == r.Node {
			node = nd
		}
	}
	direct, err := node.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	planCost := func(mode string) float64 {
		t.Helper()
		if _, err := direct.Exec(ctx, "SET plan_cache_mode = "+mode+"; DEALLOCATE ALL; PREPARE gap(int) AS "+sql); err != nil {
			t.Fatal(err)
		}
		var plan string
		if err := direct.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE gap(10)", pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		var doc []struct {
			Plan struct {
				TotalCost float64 `json:"Total Cost"`
			} `json:"Plan"`
		}
		if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
			t.Fatalf("EXPLAIN output %q: %v", plan, err)
		}
		return doc[0].Plan.TotalCost
	}
	custom, generic := planCost("force_custom_plan"), planCost("force_generic_plan")
	t.Logf("on %s: custom plan for id < 10 costs %.2f, the generic plan %.2f; pgowl judged %.2f against the limit %d",
		node.Name, custom, generic, judged, guardCostLimit)
	if judged != custom {
		t.Errorf("pgowl judged a cost of %.2f, not the custom plan's %.2f", judged, custom)
	}
	if generic <= guardCostLimit {
		t.Fatalf("the generic plan costs %.2f, under the limit %d: the test's premise does not hold", generic, guardCostLimit)
	}
	t.Logf("known gap: under plan_cache_mode = force_generic_plan the node ran a plan costing %.2f (over the limit %d); "+
		"pgowl let it through on the custom plan's %.2f", generic, guardCostLimit, custom)
}
