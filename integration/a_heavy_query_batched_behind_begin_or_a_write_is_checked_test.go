package integration

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/config"
)

// startReportGuardOwl starts pgowl with guard "reports" on sessions whose
// application_name is report-*, with a cost limit a sequential scan of
// guard_big (100 000 rows) is over.
func startReportGuardOwl(t *testing.T) *owl {
	t.Helper()
	c := sharedClusterFor(t)
	createGuardBig(t, c)
	createTable(t, c, "guard_batch_log", `CREATE TABLE guard_batch_log (at timestamptz DEFAULT now())`)
	return startOwl(t, c, func(cfg *config.Config) {
		cfg.Admin.Users = nil
		cfg.Guards = []config.Guard{{Name: "reports", Match: config.GuardMatch{ApplicationNames: []string{"report-*"}},
			MaxCost: guardCostLimit, VerdictCacheTTL: config.DefaultVerdictCacheTTL}}
	})
}

// runBatch sends sqls as one extended-protocol batch (Parse, Bind, Describe,
// Execute for each, one Sync at the end) and returns the first error.
func runExtendedBatch(t *testing.T, conn *client, sqls ...string) error {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	b := &pgconn.Batch{}
	for _, s := range sqls {
		b.ExecParams(s, nil, nil, nil, nil)
	}
	results, err := conn.PgConn().ExecBatch(ctx, b).ReadAll()
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

const heavyReport = "SELECT count(*) FROM guard_big WHERE v LIKE '%7%'"

// TestAHeavyQueryBatchedBehindBeginIsChecked: JDBC with autocommit off (the
// setting a reporting tool needs to stream rows with a fetch size) sends
// every transaction's BEGIN in the same extended-protocol batch as its first
// query: Parse/Bind/Execute "BEGIN", Parse/Bind/Execute the query, Sync.
// The README says an extended batch's statements are explained (only those
// sent after a Flush are not). The class's sequential scan alone in a batch
// is refused; behind BEGIN in the batch it must be refused too. guardFor
// takes the whole batch as transaction control (its merged effects carry
// BEGIN's Tx) and gives it no guard: the heavy query runs unchecked.
func TestAHeavyQueryBatchedBehindBeginIsChecked(t *testing.T) {
	o := startReportGuardOwl(t)
	conn := o.connect(t, withParams(map[string]string{"application_name": "report-daily"}))

	err := runExtendedBatch(t, conn, heavyReport)
	wantSQLState(t, "control: the heavy query alone in a batch", err, "54001")
	conn.routes(t)

	err = runExtendedBatch(t, conn, "BEGIN", heavyReport)
	rs := conn.routes(t)
	if _, rerr := conn.Exec(timeoutCtx(t, statementTimeout), "ROLLBACK"); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		t.Fatalf("batch [BEGIN; %s; Sync] from application report-daily ran (routes %v): the sequential scan of guard_big "+
			"(cost about 2 000, limit %d) escaped guard reports because BEGIN came first in the batch; want QUERY_COST_EXCEEDED",
			heavyReport, rs, guardCostLimit)
	}
	wantSQLState(t, "the heavy query behind BEGIN", err, "54001")
}

// TestAHeavyQueryBatchedBehindAWriteIsChecked: a guard without guard_writes
// guards its class's reads. A batch (one Sync) that logs a row and then runs
// the heavy report holds a read that the guard, alone, refuses; with the
// small INSERT ahead of it the whole batch counts as a write and the heavy
// read runs on the primary unchecked, the node the guard is there to protect.
func TestAHeavyQueryBatchedBehindAWriteIsChecked(t *testing.T) {
	o := startReportGuardOwl(t)
	conn := o.connect(t, withParams(map[string]string{"application_name": "report-daily"}))
	err := runExtendedBatch(t, conn, "INSERT INTO guard_batch_log DEFAULT VALUES", heavyReport)
	rs := conn.routes(t)
	if err == nil {
		var where []string
		for _, r := range rs {
			where = append(where, r.Node+"("+r.Role+")")
		}
		t.Fatalf("batch [INSERT INTO guard_batch_log; %s; Sync] from application report-daily ran on %s: the read's sequential scan "+
			"of guard_big (cost about 2 000, limit %d) escaped guard reports because a write came first in the batch; want QUERY_COST_EXCEEDED",
			heavyReport, strings.Join(where, ","), guardCostLimit)
	}
	wantSQLState(t, "the heavy read behind a write", err, "54001")
}

// TestAnAICommentedQueryBatchedBehindBeginIsChecked: the same JDBC batch, with the class matched by
// the AI comment of the query rather than by the session: the comment is on the batch's second
// statement, and the guard must see it there.
func TestAnAICommentedQueryBatchedBehindBeginIsChecked(t *testing.T) {
	o, ai := startCostGuardOwl(t)
	conn := o.connect(t, nil)
	err := runExtendedBatch(t, conn, "BEGIN", ai(heavyReport))
	rs := conn.routes(t)
	if _, rerr := conn.Exec(timeoutCtx(t, statementTimeout), "ROLLBACK"); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		t.Fatalf("batch [BEGIN; %s; Sync] ran (routes %v): the AI-commented sequential scan escaped the guard because its comment "+
			"was not on the batch's first statement; want QUERY_COST_EXCEEDED", ai(heavyReport), rs)
	}
	wantSQLState(t, "the AI-commented heavy query behind BEGIN", err, "54001")
}
