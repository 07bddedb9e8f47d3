package classify

import (
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pganalyze/pg_query_go/v5/parser"
	"google.golang.org/protobuf/proto"
)

// jsonTreeCases are statements whose JSON holds what the reader must get right: escapes, the
// Integer values the writer drops (0 and negative, from an A_Const's text or not at all), values
// of every scalar kind, nulls in lists.
var jsonTreeCases = []string{
	"SELECT 0", "SELECT -1", "SELECT - 7, -0, 1 - 1, -(3)", "SELECT * FROM t LIMIT 0 OFFSET 0",
	"SELECT -2147483648, -2147483647, 2147483647", "SELECT -/* c */1", "SELECT -- c\n-1",
	"CREATE SEQUENCE s INCREMENT BY -1 MINVALUE -100 START -5", "ALTER TABLE t ALTER c SET STATISTICS 0",
	"CREATE TABLE t (a int DEFAULT 0, b numeric(10, 0), c int[] DEFAULT '{}', d text DEFAULT '<x> & \"q\"')",
	"SELECT E'tab\\there\\nnew \\\\ back \\b \\f \\r', 'ü ∑ 😀', U&'\\0041', '<>', '\"'",
	"SELECT 1.5e10, -2147483649, x'1f', b'101', $1::int[], true, false, NULL",
	"SELECT f(VARIADIC ARRAY[1, 2]), ROW(1, 2)::t, (SELECT 1) IS NULL, a[1:2]",
	"INSERT INTO t VALUES (1, DEFAULT), (-1, 0) ON CONFLICT (a) DO UPDATE SET b = excluded.b RETURNING *",
	"WITH RECURSIVE w(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM w WHERE n < 5) SELECT * FROM w FOR UPDATE",
	"GRANT SELECT ON t TO PUBLIC", "COPY t FROM STDIN WITH (FORMAT csv)", "SET search_path = a, \"B\", public",
	"DO $$BEGIN RAISE NOTICE 'x'; END$$", "CREATE INDEX CONCURRENTLY i ON t USING gin (a) WHERE b > -1",
	"SELECT 1; SELECT 2;; UPDATE t SET a = -a", "", ";",
}

// parseSQL, which reads the C parser's JSON, gives the tree the protobuf path gives (the generated
// protobuf decoder, itself checked against proto.Unmarshal) for every statement of the corpus and
// the cases above, and fails where it fails. Most statements are read from the JSON, not parsed
// again through protobuf: a reader that fails on everything would pass the comparison alone.
func TestJSONTreeMatchesProtobufTree(t *testing.T) {
	statements := append(walkCorpus(t), jsonTreeCases...)
	statements = append(statements, "SET application_name = '\xd0'")
	var parsed, readFromJSON, pathTaken int
	reasons := map[string]int{}
	for _, sql := range statements {
		ok, reason := compareTreePaths(t, sql)
		if !ok {
			continue
		}
		parsed++
		if readsThroughJSON(sql) {
			pathTaken++
		}
		if reason == "" {
			readFromJSON++
		} else {
			reasons[reason]++
		}
	}
	if parsed < 500 {
		t.Fatalf("only %d statements parsed", parsed)
	}
	var summary []string
	for reason, n := range reasons {
		summary = append(summary, reason+": "+strconv.Itoa(n))
	}
	sort.Strings(summary)
	t.Logf("%d of %d statements can be read from the JSON; parsed again through protobuf: %s; %d not parsed through JSON at all (readsThroughJSON)",
		readFromJSON, parsed, strings.Join(summary, "; "), parsed-pathTaken)
	if readFromJSON*100 < parsed*95 {
		t.Errorf("only %d of %d statements read from the JSON", readFromJSON, parsed)
	}
}

// Statements whose JSON says the tree exactly are read from it; those whose JSON cannot are
// parsed again, for the reason given.
func TestJSONTreeReadsOrFallsBackFor(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT 0":                      "",
		"SELECT -1, - 7, -0":            "",
		"SELECT * FROM t LIMIT 0":       "",
		"SELECT E'a\\nb', '<x>'":        "",
		"SELECT -(3)":                   "a value the JSON does not say exactly",
		"SELECT -/* c */1":              "a value the JSON does not say exactly",
		"CREATE SEQUENCE s START -5":    "a value the JSON does not say exactly",
		"SET application_name = '\xd0'": "not UTF-8",
	} {
		text, err := parser.ParseToJSON(sql)
		if err != nil {
			t.Fatalf("%q: %v", sql, err)
		}
		if got := jsonFailure(sql, text); got != want {
			t.Errorf("%q: read from the JSON fails with %q, want %q", sql, got, want)
		}
	}
}

// FuzzJSONTree compares the two paths on any input the parser takes.
func FuzzJSONTree(f *testing.F) {
	for _, seed := range jsonTreeCases {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, sql string) { compareTreePaths(t, sql) })
}

// compareTreePaths parses sql both ways and compares; ok when both parsed it, with the reason the
// JSON was not read ("" when it was).
func compareTreePaths(t *testing.T, sql string) (ok bool, reason string) {
	t.Helper()
	want, wantErr := parseSQLThroughProtobuf(sql)
	got, gotErr := parseSQL(sql)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Errorf("%q: through protobuf: %v; through JSON: %v", sql, wantErr, gotErr)
		return false, ""
	}
	if wantErr != nil {
		return false, ""
	}
	if !proto.Equal(want, got) {
		t.Errorf("%q: the tree read from the JSON differs from the protobuf one:\nprotobuf: %v\njson:     %v", sql, want, got)
		return false, ""
	}
	if len(sql) > jsonTextBound {
		return true, "over jsonTextBound" // the writer is not called on it (readsThroughJSON)
	}
	// The reader is checked on what parseSQL sends through protobuf too (an UPDATE).
	text, err := parser.ParseToJSON(sql)
	if err != nil {
		t.Fatalf("%q: %v", sql, err)
	}
	tree, failure := readJSONTree(sql, text)
	if failure == "" && !proto.Equal(want, tree) {
		t.Errorf("%q: the tree read from the JSON differs from the protobuf one:\nprotobuf: %v\njson:     %v", sql, want, tree)
	}
	return true, failure
}

// jsonFailure is why readJSONTree does not read text ("" when it does).
func jsonFailure(sql, text string) string {
	_, failure := readJSONTree(sql, text)
	return failure
}
