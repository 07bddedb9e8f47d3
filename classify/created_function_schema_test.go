package classify

import (
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// A function taken from its CREATE statement, which succeeded, goes where PostgreSQL put it: the
// named schema, or the first schema of the session's search_path that exists, which is the last
// one when the catalogue knows of none before it. Where the catalogue cannot tell, the function is
// not taken (the change is read instead).
func TestCreatedFunctionGoesWhereTheStatementPutIt(t *testing.T) {
	cat := NewCatalogue(CatalogueData{
		Database: "app",
		Schemas:  []string{"app", "billing", "pg_catalog", "public"},
		Functions: []Function{
			{OID: 500, Schema: "app", Name: "held", Language: "sql", Volatility: 'v', Kind: 'f', ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"}, Comment: "pgowl:readonly"},
		},
	})
	unread := NewCatalogue(CatalogueData{Database: "app",
		Functions: []Function{{OID: 501, Schema: "app", Name: "other", Language: "sql", Volatility: 'v', Kind: 'f'}}})
	created := func(sql string) *CreatedFunction {
		t.Helper()
		tree, err := pg_query.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		cf := createdFunction(tree.GetStmts()[0].GetStmt().GetCreateFunctionStmt())
		if cf == nil {
			t.Fatalf("%s: not taken from the statement", sql)
		}
		return cf
	}
	oids := []uint32{500, 0xFF000001} // the first is held: passed over
	next := func() uint32 { oid := oids[0]; oids = oids[1:]; return oid }
	for _, c := range []struct {
		name   string
		cat    *Catalogue
		sql    string
		path   []string
		user   string
		schema string // "" when not taken
		oid    uint32
	}{
		{"first schema on the path", cat, "CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"app", "public"}, "u", "app", 0xFF000001},
		{"$user missing from the schemas read", cat, "CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", nil, "u", "public", 0},
		{"$user a schema", cat, "CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", nil, "billing", "billing", 0},
		{"$user with no schema list", unread, "CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", nil, "u", "", 0},
		{"a schema the catalogue does not know, another after it", cat, "CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"made_since", "public"}, "u", "", 0},
		{"a schema the catalogue does not know, last on the path", cat, "CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"made_since"}, "u", "made_since", 0},
		{"a schema the catalogue does not know, last after $user", cat, "CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"$user", "made_since"}, "u", "made_since", 0},
		{"$user unknown and last, with no schema list", unread, "CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"$user"}, "u", "u", 0},
		{"named schema", cat, "CREATE FUNCTION billing.f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"app"}, "u", "billing", 0},
		{"named schema the catalogue does not know", cat, "CREATE FUNCTION made_since.f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"app"}, "u", "made_since", 0},
		{"pg_catalog searched after a schema", cat, "CREATE FUNCTION f(x int4) RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"app", "pg_catalog"}, "u", "", 0},
		{"pg_temp first", cat, "CREATE FUNCTION f() RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"pg_temp", "app"}, "u", "", 0},
		{"held, replaced", cat, "CREATE OR REPLACE FUNCTION held(x integer) RETURNS integer LANGUAGE sql STABLE AS 'SELECT 1'", []string{"app"}, "u", "app", 500},
		{"held, not replaced", cat, "CREATE FUNCTION held(x integer) RETURNS integer LANGUAGE sql AS 'SELECT 1'", []string{"app"}, "u", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			oids = []uint32{500, 0xFF000001}
			f, ok := c.cat.CreatedFunction(created(c.sql), &Context{Database: "app", User: c.user, SearchPath: c.path}, next)
			switch {
			case c.schema == "" && ok:
				t.Errorf("taken into %s; want it read", f.Schema)
			case c.schema != "" && !ok:
				t.Errorf("not taken; want it in %s", c.schema)
			case ok && f.Schema != c.schema:
				t.Errorf("taken into %s, want %s", f.Schema, c.schema)
			case ok && c.oid != 0 && f.OID != c.oid:
				t.Errorf("OID %d, want %d", f.OID, c.oid)
			case ok && c.oid == 500 && f.Comment != "pgowl:readonly":
				t.Errorf("replaced function lost its comment: %q", f.Comment)
			}
		})
	}
}
