package classify

import (
	"fmt"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/pganalyze/pg_query_go/v5/parser"
)

// BenchmarkParseAndLabelCost splits what the parser costs each statement of
// integration/migrationbench's script, by shape, into the steps pgowl takes:
//
//   - parse_to_protobuf: PostgreSQL's parser in C, with the tree serialised to protobuf
//     (parser.ParseToProtobuf);
//   - parse: that, and the tree decoded into Go (parseSQL), what every classification that is not
//     cached starts with;
//   - fingerprint: pg_query.Fingerprint, which parses in C and walks the tree there, serialising
//     nothing: about what the C parse alone costs;
//   - labels: the fingerprint and the normalised text of the log line (statementLabels.compute).
//
// parse_to_protobuf less fingerprint is about what the trip of the tree through protobuf costs.
func BenchmarkParseAndLabelCost(b *testing.B) {
	shapes := []struct{ name, sql string }{
		{"create_plpgsql_function", "CREATE FUNCTION f_a12(x integer) RETURNS integer LANGUAGE plpgsql AS $$\nDECLARE\n  result integer;\nBEGIN\n  SELECT x + 12 INTO result;\n  RETURN result;\nEND\n$$"},
		{"create_sql_function", "CREATE FUNCTION f_a13(x integer) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT f_a12(x) + 1 $$"},
		{"call", "SELECT f_a12(12)"},
		{"create_type", "CREATE TYPE t_a3 AS (a integer, b text)"},
		{"cast", "SELECT (ROW(3, 'x')::t_a3).a"},
		{"create_view", "CREATE VIEW v_a3 AS SELECT g, f_a12(g) AS y FROM generate_series(1, 3) AS g"},
		{"view_read", "SELECT sum(y) FROM v_a3"},
	}
	steps := []struct {
		name string
		run  func(sql string) error
	}{
		{"parse_to_protobuf", func(sql string) error { _, err := parser.ParseToProtobuf(sql); return err }},
		{"parse", func(sql string) error { _, err := parseSQL(sql); return err }},
		{"fingerprint", func(sql string) error { _, err := pg_query.Fingerprint(sql); return err }},
		{"labels", func(sql string) error {
			l := statementLabels{sql: sql}
			if l.compute(); l.fingerprint == "" {
				return fmt.Errorf("%s: no fingerprint", sql)
			}
			return nil
		}},
	}
	for _, shape := range shapes {
		for _, step := range steps {
			b.Run(shape.name+"/"+step.name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := step.run(shape.sql); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
