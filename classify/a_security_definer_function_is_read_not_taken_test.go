package classify

import (
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// TestASecurityDefinerFunctionIsReadNotTaken: a SECURITY DEFINER function runs as its owner,
// whom its CREATE statement does not name (the role in force when it ran), so the catalogue
// reads it rather than taking it from the statement; SECURITY INVOKER changes nothing.
func TestASecurityDefinerFunctionIsReadNotTaken(t *testing.T) {
	for sql, taken := range map[string]bool{
		"CREATE FUNCTION f() RETURNS integer LANGUAGE sql SECURITY DEFINER AS $$ SELECT 1 $$": false,
		"CREATE FUNCTION f() RETURNS integer LANGUAGE sql SECURITY INVOKER AS $$ SELECT 1 $$": true,
		"CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$":                  true,
	} {
		tree, err := pg_query.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		if got := createdObject(tree.GetStmts()[0].GetStmt()) != nil; got != taken {
			t.Errorf("%s: taken %v, want %v", sql, got, taken)
		}
	}
}
