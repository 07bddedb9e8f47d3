package integration

import (
	"testing"
)

// TestSessionStateStatementForms: statements that leave session state in forms other than the
// plain ones the existing pin tests use. The other client, on the same (only) backend, must get a
// clean one or wait.
func TestSessionStateStatementForms(t *testing.T) {
	stateLeakSetup(t)
	for _, tc := range []struct {
		name  string
		steps []string
	}{
		{"LockThenRollback", []string{"BEGIN", "SELECT pg_advisory_lock(7530)", "ROLLBACK"}},
		{"LockThenCommit", []string{"BEGIN", "SELECT pg_advisory_lock(7531)", "COMMIT"}},
		{"TryLock", []string{"SELECT pg_try_advisory_lock(7532)"}},
		{"TryLockSharedTwoKeys", []string{"SELECT pg_try_advisory_lock_shared(75, 33)"}},
		{"LockSharedTwoKeys", []string{"SELECT pg_advisory_lock_shared(75, 34)"}},
		{"LockInWhere", []string{"SELECT 1 WHERE pg_advisory_lock(7535) IS NOT NULL"}},
		{"LockInCTE", []string{"WITH l AS (SELECT pg_advisory_lock(7536)) SELECT * FROM l"}},
		{"TempSequence", []string{"CREATE TEMP SEQUENCE review_state_seq"}},
		{"TempView", []string{"CREATE TEMP VIEW review_state_tv AS SELECT 1"}},
		{"SelectIntoTemp", []string{"SELECT 1 AS id INTO TEMP review_state_si"}},
		{"CreateTempAs", []string{"CREATE TEMP TABLE review_state_ctas AS SELECT 1 AS id"}},
		{"SessionCharacteristicsReadOnly", []string{"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"}},
		{"SetRoleNoneAfterRole", []string{"SET ROLE review_state_role", "SET ROLE NONE", "SELECT pg_advisory_lock(7537)", "SELECT pg_advisory_unlock(7537)"}},
		{"SetConfigInLargerStatement", []string{"SELECT set_config('review_state.tenant', 'tenant-a', false) FROM generate_series(1, 1)"}},
		{"ExplainAnalyzeSetsRole", []string{"EXPLAIN ANALYZE SELECT set_config('role', 'review_state_role', false)"}},
		{"ExplainAnalyzeTakesLock", []string{"EXPLAIN ANALYZE SELECT pg_advisory_lock(7538)"}},
		{"CopyOutSetsRole", []string{"COPY (SELECT set_config('role', 'review_state_role', false)) TO STDOUT"}},
		{"CopyOutTakesLock", []string{"COPY (SELECT pg_advisory_lock(7539)) TO STDOUT"}},
		{"CursorFetchSetsRole", []string{"BEGIN", "DECLARE review_state_c CURSOR FOR SELECT set_config('role', 'review_state_role', false)", "FETCH ALL FROM review_state_c", "COMMIT"}},
		{"ValuesSetsRole", []string{"VALUES (set_config('role', 'review_state_role', false))"}},
		{"CreateTableAsSetsTenant", []string{"DROP TABLE IF EXISTS review_state_ctas_t", "CREATE TABLE review_state_ctas_t AS SELECT set_config('review_state.tenant', 'tenant-a', false) AS x", "DROP TABLE review_state_ctas_t"}},
		{"SetConfigComputedName", []string{"SELECT set_config('review_state.' || 'tenant', 'computed-a', false)"}},
		{"SetConfigComputedNameRole", []string{"SELECT set_config('ro' || 'le', 'review_state_role', false)"}},
		{"SetConfigComputedNameThenRead", []string{"SELECT set_config('review_state.' || 'tenant', 'computed-a', false)", "SELECT 1"}},
		{"SetConfigQualified", []string{"SELECT pg_catalog.set_config('role', 'review_state_role', false)"}},
		{"ListenInTransactionCommitted", []string{"BEGIN", "LISTEN review_state_tx_chan", "COMMIT"}},
		{"HoldCursorInTransactionCommitted", []string{"BEGIN", "DECLARE review_state_h CURSOR WITH HOLD FOR SELECT 1", "COMMIT"}},
		{"SetRoleInMultiStatementString", []string{"SELECT 1; SET ROLE review_state_role; SELECT 2"}},
		{"ListenInMultiStatementString", []string{"SELECT 1; LISTEN review_state_ms_chan"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkStatementsLeaveNoState(t, tc.steps...)
		})
	}
}

func joinSteps(steps []string) string {
	out := ""
	for i, s := range steps {
		if i > 0 {
			out += "; "
		}
		out += s
	}
	return out
}
