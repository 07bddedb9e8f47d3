package classify

import (
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// TestRedactMasksEveryLiteral: the text logs carry keeps no literal and no
// comment, in the statement kinds pg_query's normaliser leaves alone too,
// while names (tables, settings, columns) stay readable.
func TestRedactMasksEveryLiteral(t *testing.T) {
	const marker = "zqmark"
	cases := []struct{ sql, want string }{
		{"PREPARE p AS SELECT 'zqmark'", "PREPARE p AS SELECT $1"},
		{"CREATE TEMP TABLE t AS SELECT 'zqmark' AS c", "CREATE TEMP TABLE t AS SELECT $1 AS c"},
		{"CREATE VIEW v AS SELECT 'zqmark'::text, 42", "CREATE VIEW v AS SELECT $1::text, $2"},
		{"COMMENT ON TABLE t IS 'zqmark'", "COMMENT ON TABLE t IS $1"},
		{"ALTER SYSTEM SET work_mem = 'zqmark'", "ALTER SYSTEM SET work_mem = $1"},
		{"COPY t FROM PROGRAM 'zqmark'", "COPY t FROM PROGRAM $1"},
		{"CALL p('zqmark')", "CALL p($1)"},
		{"NOTIFY ch, 'zqmark'", "NOTIFY ch, $1"},
		{"SELECT 1 /* zqmark */ -- zqmark\n", "SELECT $1  \n"},
		{"SET application_name = zqmark", "SET application_name = $1"},
		{"SET LOCAL search_path TO public, zqmark", "SET LOCAL search_path TO $1, $2"},
		{"ALTER ROLE r SET app.x TO zqmark", "ALTER ROLE r SET app.x TO $1"},
		{"CREATE FUNCTION f() RETURNS int SET search_path = zqmark AS $$ SELECT 1 $$ LANGUAGE sql", "CREATE FUNCTION f() RETURNS int SET search_path = $1 AS $2 LANGUAGE sql"},
		{"UPDATE t SET a = b + 1 WHERE c = 'zqmark'", "UPDATE t SET a = b + $1 WHERE c = $2"},
		{"SELECT $1, E'zqmark', B'101', X'ff', U&'zqmark', 1.5e3", "SELECT $1, $2, $3, $4, $5, $6"},
		{"DO $x$BEGIN RAISE NOTICE 'zqmark'; END$x$", "DO $1"},
		{"SET TIME ZONE 'zqmark'", "SET TIME ZONE $1"},
		{"SET x.y TO DEFAULT", "SET x.y TO DEFAULT"},
		{"SELECT 'unterminated", UnparseablePlaceholder},
	}
	for _, tc := range cases {
		got := Redact(tc.sql)
		if got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.sql, got, tc.want)
		}
		if strings.Contains(got, marker) {
			t.Errorf("Redact(%q) kept the literal: %q", tc.sql, got)
		}
	}
}

// FuzzRedact: whatever the input, Redact returns the placeholder or a text
// in which the scanner finds no constant and no comment.
func FuzzRedact(f *testing.F) {
	for _, seed := range []string{
		"SELECT 'a'", "SET x = y", "COMMENT ON TABLE t IS 'c'", "SELECT 1 /* c */", "DO $$ x $$",
		"SET search_path = a, -1, 'b'", "ALTER ROLE r SET x.y TO DEFAULT", "SELECT $1, 2; SET LOCAL a TO b",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		got := Redact(sql)
		if got == UnparseablePlaceholder {
			return
		}
		scan, err := pg_query.Scan(got)
		if err != nil {
			t.Fatalf("Redact(%q) = %q, which does not scan: %v", sql, got, err)
		}
		for _, tok := range scan.GetTokens() {
			if isConstantToken(tok.Token) || tok.Token == pg_query.Token_SQL_COMMENT || tok.Token == pg_query.Token_C_COMMENT {
				t.Fatalf("Redact(%q) = %q keeps %s %q", sql, got, tok.Token, got[tok.Start:tok.End])
			}
		}
	})
}
