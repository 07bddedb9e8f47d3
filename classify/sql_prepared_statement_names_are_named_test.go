package classify

import (
	"reflect"
	"testing"
)

// TestSQLPreparedStatementNamesAreNamed: the names a string's SQL PREPARE makes, and those its
// EXECUTE (also under EXPLAIN and CREATE TABLE AS) and DEALLOCATE name, are in its effects, in
// order, whichever statement of the string names them: the proxy refuses names it reserves for
// the statements it prepares on the nodes.
func TestSQLPreparedStatementNamesAreNamed(t *testing.T) {
	c := New(Options{})
	for _, tc := range []struct {
		sql            string
		prepares, uses []string
	}{
		{"PREPARE a AS SELECT 1", []string{"a"}, nil},
		{"EXECUTE pgowl_x", nil, []string{"pgowl_x"}},
		{"EXECUTE PGOWL_X(1)", nil, []string{"pgowl_x"}},
		{"DEALLOCATE pgowl_x", nil, []string{"pgowl_x"}},
		{"DEALLOCATE ALL", nil, nil},
		{"EXPLAIN EXECUTE c", nil, []string{"c"}},
		{"EXPLAIN ANALYZE EXECUTE c", nil, []string{"c"}},
		{"CREATE TABLE t2 AS EXECUTE d", nil, []string{"d"}},
		{"EXPLAIN CREATE TABLE t2 AS EXECUTE d", nil, []string{"d"}},
		{"SELECT 1; PREPARE a AS SELECT 2; EXECUTE b; DEALLOCATE e", []string{"a"}, []string{"b", "e"}},
		{"SELECT 'EXECUTE pgowl_x'", nil, nil},
	} {
		eff := c.Classify(tc.sql)
		if !reflect.DeepEqual(eff.Prepares, tc.prepares) || !reflect.DeepEqual(eff.UsesPrepared, tc.uses) {
			t.Errorf("%s: prepares %q, uses %q; want %q, %q", tc.sql, eff.Prepares, eff.UsesPrepared, tc.prepares, tc.uses)
		}
	}
}
