package classify

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
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

// A 205 KB UPDATE whose JSON would pass 1 GB (1000 columns share a source of 200,000 '<', each
// written as \u003c) parses, in a process of its own so that a failure does not end the
// package's tests: before the bound, parseSQL ended the process here. It takes some seconds and
// about 600 MB.
func TestUpdateWhoseJSONWouldPassTheWritersBoundParses(t *testing.T) {
	columns := make([]string, 1000)
	for i := range columns {
		columns[i] = "c" + strconv.Itoa(i)
	}
	sql := "UPDATE t SET (" + strings.Join(columns, ",") + ") = (SELECT '" + strings.Repeat("<", 200000) + "')"
	if os.Getenv("PGOWL_PARSE_CHILD") == "1" {
		tree, err := parseSQL(sql)
		if err != nil || len(tree.GetStmts()) != 1 {
			t.Fatalf("parseSQL: %d statements, %v", len(tree.GetStmts()), err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUpdateWhoseJSONWouldPassTheWritersBoundParses$", "-test.v")
	cmd.Env = append(os.Environ(), "PGOWL_PARSE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("parsing a %d-byte UPDATE ended the process or failed (%v):\n%.2000s", len(sql), err, out)
	}
}
