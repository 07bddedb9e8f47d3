package classify

import (
	"reflect"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// TestCatalogueChangesNameWhatChanged: a statement that changes the catalogue names the functions,
// relations and types it changes, or everything when its reach is not in its parse tree.
func TestCatalogueChangesNameWhatChanged(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want *CatalogueChanges
	}{
		{"CREATE FUNCTION app.f(x int) RETURNS int LANGUAGE sql AS $$ SELECT x $$", &CatalogueChanges{Functions: []string{"f"}}},
		{"CREATE OR REPLACE FUNCTION \"Mixed\"() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$", &CatalogueChanges{Functions: []string{"Mixed"}}},
		{"ALTER FUNCTION f(int) STABLE", &CatalogueChanges{Functions: []string{"f"}}},
		{"DROP FUNCTION f(int), g()", &CatalogueChanges{Functions: []string{"f", "g"}}},
		{"DROP FUNCTION f(int) CASCADE", &CatalogueChanges{Everything: true}},
		{"COMMENT ON FUNCTION f(int) IS 'pgowl:readonly'", &CatalogueChanges{Functions: []string{"f"}}},
		{"CREATE AGGREGATE agg(int) (sfunc = int4pl, stype = int)", &CatalogueChanges{Functions: []string{"agg"}}},
		{"CREATE VIEW v AS SELECT 1", &CatalogueChanges{Relations: []string{"v"}, Types: []string{"v", "_v"}}},
		{"CREATE TABLE p1 PARTITION OF p FOR VALUES IN (1)", &CatalogueChanges{Relations: []string{"p1", "p"}, Types: []string{"p1", "_p1", "p", "_p"}}},
		{"CREATE TEMP TABLE scratch (x int)", nil},
		{"CREATE TYPE t AS (a int)", &CatalogueChanges{Types: []string{"t", "_t"}}},
		{"CREATE TYPE mood AS ENUM ('a')", &CatalogueChanges{Types: []string{"mood", "_mood"}}},
		{"CREATE DOMAIN pos AS int CHECK (VALUE > 0)", &CatalogueChanges{Types: []string{"pos", "_pos"}}},
		{"DROP TYPE t", &CatalogueChanges{Types: []string{"t", "_t"}}},
		{"DROP VIEW v", &CatalogueChanges{Relations: []string{"v"}, Types: []string{"v", "_v"}}},
		{"DROP VIEW v CASCADE", &CatalogueChanges{Everything: true}},
		{"CREATE POLICY p ON app.t USING (true)", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"DROP POLICY p ON t", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"ALTER TABLE t RENAME TO u", &CatalogueChanges{Everything: true}},
		{"ALTER TABLE t ADD COLUMN c int", nil},
		// What a write of the table runs (Relation.WriteRuns).
		{"CREATE TRIGGER trg BEFORE INSERT ON app.t FOR EACH ROW EXECUTE FUNCTION f()", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"DROP TRIGGER trg ON app.t", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"DROP TRIGGER trg ON t CASCADE", &CatalogueChanges{Everything: true}},
		{"ALTER TABLE t DISABLE TRIGGER trg", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"ALTER TABLE t ENABLE ALWAYS TRIGGER trg", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"ALTER TABLE t ALTER COLUMN c SET DEFAULT f()", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"ALTER TABLE t ADD CONSTRAINT k CHECK (f(c))", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"ALTER TABLE t ADD CONSTRAINT u UNIQUE (c)", nil},
		{"ALTER TABLE t DROP CONSTRAINT k", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"ALTER TABLE t ADD COLUMN c int DEFAULT 0", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"ALTER TABLE t ADD COLUMN c int GENERATED ALWAYS AS (f(d)) STORED", &CatalogueChanges{Relations: []string{"t"}, Types: []string{"t", "_t"}}},
		{"ALTER TABLE t DROP COLUMN c", nil},
		{"ALTER TABLE t ENABLE ROW LEVEL SECURITY", &CatalogueChanges{Everything: true}},
		{"CREATE OPERATOR ### (function = f, leftarg = int, rightarg = int)", &CatalogueChanges{Everything: true}},
		{"CREATE CAST (int AS t) WITH FUNCTION f(int)", &CatalogueChanges{Everything: true}},
		{"DO $$ BEGIN END $$", &CatalogueChanges{Everything: true}},
		{"CREATE SCHEMA s", &CatalogueChanges{Schemas: []string{"s"}}},
		{"CREATE SCHEMA IF NOT EXISTS \"Mixed\" AUTHORIZATION joe", &CatalogueChanges{Schemas: []string{"Mixed"}}},
		{"CREATE SCHEMA AUTHORIZATION joe", &CatalogueChanges{Schemas: []string{"joe"}}},
		{"CREATE SCHEMA AUTHORIZATION CURRENT_USER", &CatalogueChanges{Everything: true}},
		{"CREATE SCHEMA s CREATE VIEW v AS SELECT 1", &CatalogueChanges{Everything: true}},
		{"INSERT INTO t VALUES (1)", nil},
	} {
		tree, err := pg_query.Parse(tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if got := catalogueChanges(tree.GetStmts()[0].GetStmt()); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.sql, got, tc.want)
		}
	}
}

// TestCatalogueChangesMerge: changes add up, and too many names become everything.
func TestCatalogueChangesMerge(t *testing.T) {
	var c CatalogueChanges
	c.Merge(&CatalogueChanges{Functions: []string{"f"}})
	c.Merge(&CatalogueChanges{Functions: []string{"f", "g"}, Types: []string{"t"}})
	if want := (CatalogueChanges{Functions: []string{"f", "g"}, Types: []string{"t"}}); !reflect.DeepEqual(c, want) {
		t.Errorf("merged %+v, want %+v", c, want)
	}
	for i := 0; i <= maxChangedNames; i++ {
		c.Merge(&CatalogueChanges{Relations: []string{string(rune('a'+i%26)) + string(rune('a'+i/26))}})
	}
	if !c.Everything || len(c.Functions) > 0 {
		t.Errorf("after %d names: %+v, want everything", maxChangedNames+3, c)
	}
	c.Merge(&CatalogueChanges{Functions: []string{"h"}})
	if !c.Everything || len(c.Functions) > 0 {
		t.Errorf("everything merged with more: %+v", c)
	}
}
