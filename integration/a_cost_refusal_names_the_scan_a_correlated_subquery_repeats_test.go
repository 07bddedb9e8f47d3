package integration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/integration/owltest"
)

// TestACostRefusalNamesTheScanACorrelatedSubqueryRepeats: a report with a
// correlated subquery, (SELECT count(*) FROM guard_big b WHERE b.v = s.v)
// for each of 50 rows of a small table, costs about 50 sequential scans of
// guard_big. PostgreSQL's plan shows that SubPlan's cost per run and
// charges its 50 runs to the scan of the small table it is evaluated in.
// pgowl's own cost (a node's total minus its children's totals) subtracts
// the SubPlan once, so the refusal's DETAIL names the 50-row table as
// carrying almost all of the cost and the scan of guard_big as a small share:
// the user is sent to make the wrong scan cheaper.
func TestACostRefusalNamesTheScanACorrelatedSubqueryRepeats(t *testing.T) {
	o, ai := startCostGuardOwl(t)
	createTable(t, o.nodes, "guard_small", `CREATE TABLE guard_small (id int PRIMARY KEY, v text);
		INSERT INTO guard_small SELECT g, 'value ' || g FROM generate_series(1, 50) g; ANALYZE guard_small;`)
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	ctx := timeoutCtx(t, statementTimeout)
	_, err := conn.Exec(ctx, ai("SELECT s.id, (SELECT count(*) FROM guard_big b WHERE b.v = s.v) FROM guard_small s"))
	pgErr := wantSQLState(t, "the correlated subquery report", err, "54001")
	if pgErr == nil {
		return
	}
	lines := strings.Split(pgErr.Detail, "\n")
	if len(lines) < 2 {
		t.Fatalf("DETAIL without plan nodes:\n%s", pgErr.Detail)
	}
	top := lines[1]
	share := regexp.MustCompile(`relation=public\.guard_big .* share_pct=([0-9.]+)`).FindStringSubmatch(pgErr.Detail)
	// A known gap (README, Limits): EXPLAIN does not say how often a SubPlan runs (a hashed or
	// uncorrelated one runs once, a correlated one for each row, an EXISTS one until it finds a
	// row), so its runs stay charged to its parent. Logged while it is there; once the refusal
	// names the repeated scan, the test fails so that the documentation loses the gap.
	owltest.KnownGap(t, !strings.Contains(top, "relation=public.guard_big "), fmt.Sprintf(
		"the refusal names as the costliest plan node %q, not the sequential scan of guard_big that the subquery runs 50 times (guard_big's line: %q)",
		top, share))
}
