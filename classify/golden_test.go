package classify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// goldenCase is one entry of a testdata/*_cases.json table.
type goldenCase struct {
	Comment string        `json:"comment"`
	SQL     string        `json:"sql"`
	Access  Access        `json:"access"`
	Reason  Reason        `json:"reason"`
	Subject string        `json:"subject,omitempty"` // compared only when given
	Tx      TxControl     `json:"tx,omitempty"`
	Session SessionEffect `json:"session,omitempty"`
	Pgowl   *PgowlCommand `json:"pgowl,omitempty"`
	// Statements is the expected statement count; absent means 1.
	Statements *int `json:"statements,omitempty"`
}

// loadGolden reads every golden table, rejecting unknown fields.
func loadGolden(t *testing.T) map[string][]goldenCase {
	t.Helper()
	return loadGoldenForBenchmark(t)
}

// loadGoldenForBenchmark is loadGolden for any test or benchmark.
func loadGoldenForBenchmark(t testing.TB) map[string][]goldenCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no golden tables in testdata")
	}
	tables := make(map[string][]goldenCase, len(paths))
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		decoder := json.NewDecoder(bytes.NewReader(data))
		decoder.DisallowUnknownFields()
		var cases []goldenCase
		if err := decoder.Decode(&cases); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for i, tc := range cases {
			if tc.Comment == "" || tc.Access == 0 || tc.Reason == 0 {
				t.Fatalf("%s case %d (%q): comment, access and reason are required", path, i, tc.SQL)
			}
		}
		tables[path] = cases
	}
	return tables
}

// actualCase describes effects in golden form, keeping the expected case's comment.
func actualCase(expected goldenCase, effects Effects) goldenCase {
	actual := goldenCase{
		Comment: expected.Comment,
		SQL:     expected.SQL,
		Access:  effects.Access,
		Reason:  effects.Reason,
		Subject: effects.Subject,
		Tx:      effects.Tx,
		Session: effects.Session,
		Pgowl:   effects.Pgowl,
	}
	if effects.Statements != 1 {
		statements := effects.Statements
		actual.Statements = &statements
	}
	return actual
}

// goldenMismatch lists the differences between the expected case and the actual one.
func goldenMismatch(expected, actual goldenCase) []string {
	var diffs []string
	if expected.Access != actual.Access {
		diffs = append(diffs, fmt.Sprintf("access %v, want %v", actual.Access, expected.Access))
	}
	if expected.Reason != actual.Reason {
		diffs = append(diffs, fmt.Sprintf("reason %v, want %v", actual.Reason, expected.Reason))
	}
	if expected.Subject != "" && expected.Subject != actual.Subject {
		diffs = append(diffs, fmt.Sprintf("subject %q, want %q", actual.Subject, expected.Subject))
	}
	if expected.Tx != actual.Tx {
		diffs = append(diffs, fmt.Sprintf("tx %v, want %v", actual.Tx, expected.Tx))
	}
	if expected.Session != actual.Session {
		diffs = append(diffs, fmt.Sprintf("session %v, want %v", actual.Session, expected.Session))
	}
	if !reflect.DeepEqual(expected.Pgowl, actual.Pgowl) {
		diffs = append(diffs, fmt.Sprintf("pgowl %+v, want %+v", actual.Pgowl, expected.Pgowl))
	}
	wantStatements, gotStatements := 1, 1
	if expected.Statements != nil {
		wantStatements = *expected.Statements
	}
	if actual.Statements != nil {
		gotStatements = *actual.Statements
	}
	if wantStatements != gotStatements {
		diffs = append(diffs, fmt.Sprintf("statements %d, want %d", gotStatements, wantStatements))
	}
	return diffs
}

// checkInvariants verifies what must hold for every verdict, whatever the SQL.
func checkInvariants(t *testing.T, sql string, effects Effects) {
	t.Helper()
	if effects.ParseError != "" {
		if effects.Access != Write || effects.Reason != ReasonUnknownEffect {
			t.Errorf("%q: unparseable input must fail closed, got %v %v", sql, effects.Access, effects.Reason)
		}
		if effects.Fingerprint != "" || effects.Normalized != UnparseablePlaceholder {
			t.Errorf("%q: unparseable input must have no fingerprint and the placeholder, got %q %q", sql, effects.Fingerprint, effects.Normalized)
		}
		if !strings.HasPrefix(effects.Subject, "could not parse: ") {
			t.Errorf("%q: unparseable subject %q", sql, effects.Subject)
		}
	} else if effects.Fingerprint == "" {
		t.Errorf("%q: parsed input needs a fingerprint", sql)
	}
	if (effects.Access == Read) != effects.Reason.ReadReason() && effects.Reason != ReasonHint {
		t.Errorf("%q: access %v does not match reason %v", sql, effects.Access, effects.Reason)
	}
	if effects.Subject == "" {
		t.Errorf("%q: empty subject", sql)
	}
	if effects.Pgowl != nil && (effects.Statements != 1 || effects.Access != Read || effects.Session != 0) {
		t.Errorf("%q: pgowl command must be a single read statement without session effects: %+v", sql, effects)
	}
}

// TestGolden classifies every golden case through a caching classifier (twice, so the second answer
// comes from the cache) and writes <table>.actual.json next to any table with a mismatch.
func TestGolden(t *testing.T) {
	classifier := New(Options{})
	total := 0
	for path, cases := range loadGolden(t) {
		actuals := make([]goldenCase, 0, len(cases))
		failed := false
		for _, tc := range cases {
			effects := classifier.Classify(tc.SQL)
			cached := classifier.Classify(tc.SQL)
			if !reflect.DeepEqual(effects, cached) {
				t.Errorf("%s: %q: cached result differs:\n%+v\n%+v", path, tc.SQL, effects, cached)
			}
			checkInvariants(t, tc.SQL, effects)
			actual := actualCase(tc, effects)
			actuals = append(actuals, actual)
			if diffs := goldenMismatch(tc, actual); len(diffs) > 0 {
				failed = true
				t.Errorf("%s: %s\n  sql: %s\n  %s", path, tc.Comment, tc.SQL, strings.Join(diffs, "\n  "))
			}
		}
		total += len(cases)
		actualPath := strings.TrimSuffix(path, ".json") + ".actual.json"
		if failed {
			writeActual(t, actualPath, actuals)
		} else if err := os.Remove(actualPath); err != nil && !os.IsNotExist(err) {
			t.Errorf("remove stale %s: %v", actualPath, err)
		}
	}
	if total < 250 {
		t.Errorf("only %d golden cases; the suite promises at least 250", total)
	}
}

func writeActual(t *testing.T, path string, cases []goldenCase) {
	t.Helper()
	var out bytes.Buffer
	out.WriteString("[\n")
	for i, tc := range cases {
		var line bytes.Buffer
		encoder := json.NewEncoder(&line)
		encoder.SetEscapeHTML(false)
		if err := encoder.Encode(tc); err != nil {
			t.Fatal(err)
		}
		out.WriteString("  ")
		out.Write(bytes.TrimSuffix(line.Bytes(), []byte("\n")))
		if i < len(cases)-1 {
			out.WriteByte(',')
		}
		out.WriteByte('\n')
	}
	out.WriteString("]\n")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// TestFastPathMatchesFullPath checks that every string the keyword fast path accepts gets exactly
// the effects of the full parse, over the golden cases and variations aimed at the fast path's edges.
func TestFastPathMatchesFullPath(t *testing.T) {
	classifier := New(Options{CacheSize: -1})
	inputs := []string{
		"BEGIN", "begin", "Begin;", " BEGIN ; ", "BEGIN WORK", "BEGIN TRANSACTION", "BEGIN READ ONLY",
		"begin transaction read only;", "BEGIN READ WRITE", "START TRANSACTION", "START TRANSACTION READ ONLY",
		"START TRANSACTION READ WRITE", "COMMIT", "commit work", "COMMIT TRANSACTION", "END", "end;", "END WORK",
		"ROLLBACK", "rollback transaction", "ABORT", "abort work;", "SET x = 1", "SET x TO 1", "set x to 'a b c'",
		"SET application_name = 'pgbench'", "SET search_path TO public", "SET search_path = 'a', 'b'",
		"SET extra_float_digits = 3", "SET x = 0", "SET x = 007", "SET x = 1234567890", "SET x = on",
		"SET x = OFF", "SET x = true", "SET x = FALSE", "SET x = default", "SET x = local", "SET x = warning",
		"SET SESSION x = 1", "SET LOCAL x = 1", "SET SESSION AUTHORIZATION DEFAULT", "SET LOCAL ROLE x",
		"SET role = 'app'", "SET session_authorization = 'bob'", "SET time zone 'UTC'", "SET timezone = 'UTC'",
		"SET transaction_read_only = on", "SET transaction_read_only = off", "SET transaction_read_only = 'no'",
		"SET a.b.c = 1", "SET a. b = 1", "SET a.b = 'x'", "SET pgowl.notice = off", "SET pgowl.notice TO on",
		"SET pgowl.max_replica_lag = '500ms'", "SET pgowl.Notice = 1", "set PGOWL.NOTICE = 'x'",
		"SET select = 1", "SET x = select", "SET x = 'it''s'", "SET x = E'a'", "SET x = 'a' 'b'", "SET x = 'a\\b'",
		"SET x = ", "SET = 1", "SET x 1", "SET x = 1; SET y = 2", "SET x = 1;;", "SHOW x", "show all",
		"SHOW search_path;", "SHOW TIME ZONE", "SHOW transaction isolation level", "SHOW session authorization",
		"SHOW pgowl.nodes", "SHOW pgowl.explain", "SHOW pgowl.", "SHOW a.b.c", "SHOW select", "SHOW x y",
		"SHOW \"MixedCase\"", "BEGIN; COMMIT", "COMMIT AND CHAIN", "SET x = -1", "SET x = 1.5", "SET x = 1e5",
		"SET x = $1", "SET x = 'caf\u00e9'", "SET x = '\xd0'", "SHOW \xd0", "SET x_y$z = 1", "START", "BEGIN ISOLATION LEVEL SERIALIZABLE",
	}
	for _, cases := range loadGolden(t) {
		for _, tc := range cases {
			inputs = append(inputs, tc.SQL)
		}
	}
	accepted := 0
	for _, sql := range inputs {
		fast, ok := classifier.classifyFast(sql)
		if !ok {
			continue
		}
		accepted++
		full := classifier.classifyFull(sql)
		if !reflect.DeepEqual(fast, full) {
			t.Errorf("%q:\nfast %+v\nfull %+v", sql, fast, full)
		}
	}
	if accepted < 60 {
		t.Errorf("fast path accepted only %d inputs; it should cover the trivial statements", accepted)
	}
	t.Logf("fast path accepted %d of %d inputs", accepted, len(inputs))
}
