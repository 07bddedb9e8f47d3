package classify

import (
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// maskLiterals skips the scanner only for a text it would return unchanged: for every statement of
// the testdata corpus, and pg_query's normalised text of each, a text holdsNothingToMask passes
// is what the scanner-driven masking makes of it. The skip must also apply to the common case,
// normalised queries, or it saves nothing.
func TestMaskingSkipsTheScanOnlyWhenNothingIsMasked(t *testing.T) {
	var texts []string
	for _, sql := range walkCorpus(t) {
		texts = append(texts, sql)
		if normalized, err := pg_query.Normalize(sql); err == nil {
			texts = append(texts, normalized)
		}
	}
	texts = append(texts, "SELECT f_12($1)", "SELECT a$1 FROM t WHERE x = $2", "select x1, $10 from t_2",
		"SELECT $1abc", "SELECT $$x$$", "SELECT 1", "SELECT x.1", "SELECT é1 FROM t", "SET search_path = a", "(SELECT $1)",
		"CREATE FUNCTION f_002_0(x integer) RETURNS integer LANGUAGE plpgsql AS $1", "CREATE TYPE t_1 AS (a integer, b text)",
		"ALTER TABLE t_2 ADD COLUMN c3 integer", "CREATE FUNCTION f(x int) RETURNS int LANGUAGE sql SET search_path = a AS $1",
		"ALTER ROLE r SET work_mem TO big", "alter function f() sEt search_path to a, b", "CREATE VIEW v AS SELECT 1 AS y")
	skipped := 0
	for _, text := range texts {
		if !holdsNothingToMask(text) {
			continue
		}
		skipped++
		tokens, err := scanSQL(text)
		if err != nil {
			t.Errorf("%q: skipped, but the scanner fails: %v", text, err)
			continue
		}
		masked, err := maskLiteralTokens(text, tokens)
		if err != nil || masked != text {
			t.Errorf("%q: skipped, but masking by the scanner gives %q (%v)", text, masked, err)
		}
	}
	if skipped < 200 {
		t.Fatalf("only %d of %d texts skip the scan", skipped, len(texts))
	}
	for _, text := range []string{"SELECT 1", "SELECT $$x$$", "SELECT $1abc", "SET search_path = a", "SELECT 'x'", "SELECT x -- y",
		"CREATE FUNCTION f(x int) RETURNS int LANGUAGE sql SET search_path = a AS $1", "ALTER ROLE r SET work_mem TO big",
		"alter function f() sEt search_path to a, b", "CREATE VIEW v AS SELECT 1 AS y"} {
		if holdsNothingToMask(text) {
			t.Errorf("%q skips the scan", text)
		}
	}
	// The statements a migration sends most, as pg_query normalises them (a function's body, a
	// constant, becomes $1), have nothing left to mask: they skip the scan.
	for _, text := range []string{"CREATE FUNCTION f_002_0(x integer) RETURNS integer LANGUAGE plpgsql AS $1",
		"CREATE TYPE t_1 AS (a integer, b text)", "ALTER TABLE t_2 ADD COLUMN c3 integer", "UPDATE t SET a = $1 WHERE id = $2",
		"SELECT a FROM t ORDER BY a OFFSET $1"} {
		if !holdsNothingToMask(text) {
			t.Errorf("%q does not skip the scan", text)
		}
	}
}
