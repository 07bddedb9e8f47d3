package integration

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// README, "Seeing what pgowl does": pgowl_refusals_total{code} counts "units no node ran: ...
// QUERY_COST_EXCEEDED (a guard refused it on its node)". A guarded statement refused for its
// cost did not run; an operator who alerts on pgowl_refusals_total, or reads routed units as
// work the nodes did, must see it as a refusal, not as a routed unit.
func TestACostRefusalIsCountedAsARefusalNotARoutedUnit(t *testing.T) {
	o, ai := startCostGuardOwl(t)
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	ctx := timeoutCtx(t, statementTimeout)

	const refused = 3
	for i := 0; i < refused; i++ {
		_, err := conn.Exec(ctx, ai("SELECT count(*) FROM guard_big WHERE v LIKE '%7%'"))
		wantCostRefusal(t, "guarded sequential scan", err)
		conn.routes(t)
	}

	_, metrics := o.adminGet(t, "/metrics")
	var costRefusals float64
	var routedAs []string
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, `pgowl_refusals_total{code="QUERY_COST_EXCEEDED"} `) {
			costRefusals = metricValue(t, metrics, `pgowl_refusals_total{code="QUERY_COST_EXCEEDED"}`)
		}
		if strings.HasPrefix(line, "pgowl_routed_units_total{") && strings.Contains(line, `outcome="54001"`) {
			routedAs = append(routedAs, line)
		}
	}
	if costRefusals != refused {
		t.Errorf("after %d statements refused with QUERY_COST_EXCEEDED, pgowl_refusals_total{code=\"QUERY_COST_EXCEEDED\"} is %v, want %d; the refusals show up as routed units instead: %v",
			refused, costRefusals, refused, routedAs)
	}
	if len(routedAs) != 0 {
		t.Errorf("statements that never ran (refused for cost) are counted in pgowl_routed_units_total: %v", routedAs)
	}
}
