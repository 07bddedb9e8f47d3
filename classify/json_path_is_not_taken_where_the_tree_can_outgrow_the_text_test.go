package classify

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The JSON path is not taken where the written tree can outgrow the 1 GB pg_query's JSON writer
// can hold, which ends the process: a statement that may hold a multi-column assignment (its
// source is written once per column), or one longer than jsonTextBound.
func TestJSONPathIsNotTakenWhereTheTreeCanOutgrowTheText(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT f_a12(12)":                                    true,
		"INSERT INTO t VALUES (1, 'x')":                       true,
		"CREATE VIEW v AS SELECT set_config('a', 'b', false)": true,
		"UPDATE t SET a = 1":                                  false,
		"UPDATE t SET (a, b) = (SELECT 1, 2)":                 false,
		"update t set (a, b) = row(1, 2)":                     false,
		"UpDaTe t SeT (a) = (1)":                              false,
		"INSERT INTO t VALUES (1) ON CONFLICT (a) DO UPDATE SET (a, b) = (SELECT 1, 2)":  false,
		"MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN UPDATE SET (a, b) = (1, 2)": false,
		"SELECT '" + strings.Repeat("x", jsonTextBound) + "'":                            false,
		"SELECT '" + strings.Repeat("x", jsonTextBound-len("SELECT ''")) + "'":           true,
	} {
		if got := readsThroughJSON(sql); got != want {
			t.Errorf("%.80q: readsThroughJSON = %v, want %v", sql, got, want)
		}
	}
}

// A statement whose multi-column assignments could copy their sources into a tree past
// sharedTreeBudget is not parsed, and goes to the primary as of unknown effect, at once: a 205 KB
// UPDATE of 1000 columns from a 200 KB string of '<' (whose JSON, before any bound, ended the
// process, and whose protobuf took 200 MB), the same with a comment before its '=', and an UPDATE
// nested in its own source. Statements that hold no such list, or small ones, are parsed as
// before, however many commas they have.
func TestStatementWhoseTreeCouldOutgrowItsBoundIsNotParsed(t *testing.T) {
	columnList := func(prefix string, n int) string {
		columns := make([]string, n)
		for i := range columns {
			columns[i] = prefix + strconv.Itoa(i)
		}
		return strings.Join(columns, ",")
	}
	rows := make([]string, 3000)
	for i := range rows {
		rows[i] = "(" + strconv.Itoa(i) + ", 'x')"
	}
	c := New(Options{})
	ctx := &Context{Database: "app", User: "app"}
	for _, tc := range []struct {
		name, sql string
		parsed    bool
	}{
		{"1000 columns from 200 KB", "UPDATE t SET (" + columnList("c", 1000) + ") = (SELECT '" + strings.Repeat("<", 200000) + "')", false},
		{"a comment before the =", "UPDATE t SET (" + columnList("c", 1000) + ") /* = */ = (SELECT '" + strings.Repeat("x", 5000) + "')", false},
		{"nested in its own source", "UPDATE t SET (" + columnList("a", 200) + ") = (SELECT * FROM (WITH u AS (UPDATE t2 SET (" +
			columnList("b", 200) + ") = (SELECT '" + strings.Repeat("x", 100) + "') RETURNING 1) SELECT * FROM u) s)", false},
		{"a bulk upsert", "INSERT INTO t (a, b) VALUES " + strings.Join(rows, ", ") + " ON CONFLICT (a) DO UPDATE SET b = excluded.b", true},
		{"a small multi-column assignment", "UPDATE t SET (a, b, c) = (SELECT '" + strings.Repeat("x", 20000) + "', 2, 3) WHERE id = 1", true},
		{"a row comparison, not an assignment", "UPDATE t SET a = 1 WHERE (" + columnList("c", 1000) + ") = (SELECT '" + strings.Repeat("x", 5000) + "')", true},
	} {
		started := time.Now()
		_, err := parseSQL(tc.sql)
		var tooCostly *treeTooCostlyError
		if got := !errors.As(err, &tooCostly); got != tc.parsed {
			t.Errorf("%s (%d bytes): parsed %v (%v), want %v", tc.name, len(tc.sql), got, err, tc.parsed)
		}
		effects := c.ClassifyIn(tc.sql, ctx)
		notParsed := effects.Reason == ReasonUnknownEffect && strings.Contains(effects.Subject, "multi-column assignment")
		if notParsed == tc.parsed || effects.Access != Write {
			t.Errorf("%s: %v %v %q", tc.name, effects.Access, effects.Reason, effects.Subject)
		}
		if took := time.Since(started); !tc.parsed && took > 2*time.Second {
			t.Errorf("%s: refused in %v", tc.name, took)
		}
	}
}
