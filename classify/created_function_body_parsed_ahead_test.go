package classify

import (
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// While the node runs a CREATE FUNCTION, the proxy has the body parsed ahead (PrepareCreated): the
// statement that calls the function right after finds the parses kept, and has only the analysis
// left. What is kept must be what the analysis parses (the same texts: else the parse is done
// twice), and the verdict must be the one the analysis gives without it.
func TestCreatedFunctionBodyParsedAheadIsWhatItsAnalysisParses(t *testing.T) {
	base := CatalogueData{
		Database: "app",
		Schemas:  []string{"pg_catalog", "public"},
		Functions: []Function{
			{OID: 500, Schema: "public", Name: "held", Language: "sql", Volatility: 's', Kind: 'f', ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"},
				Arguments: "x integer", Result: "integer", Source: "SELECT x"},
		},
	}
	ctx := &Context{Database: "app", User: "app", SearchPath: []string{"public"}}
	for _, c := range []struct {
		name, sql, call string
		want            Access
	}{
		{"PL/pgSQL", `CREATE FUNCTION made(x integer) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  result integer;
BEGIN
  SELECT held(x) + 7 INTO result;
  result := result * 2;
  IF result > 10 THEN
    PERFORM nextval('seq');
  END IF;
  RETURN result;
END
$$`, "SELECT made(1)", Write},
		{"PL/pgSQL reading", `CREATE FUNCTION made(x integer) RETURNS integer LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN held(x) + 1; END $$`, "SELECT made(1)", Read},
		{"SQL", "CREATE FUNCTION made(x integer) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT held(x) + 3 $$", "SELECT made(1)", Read},
	} {
		t.Run(c.name, func(t *testing.T) {
			source := &movingSource{cat: NewCatalogue(base)}
			ahead := New(Options{Catalogues: source})
			tree, err := pg_query.Parse(c.sql)
			if err != nil {
				t.Fatal(err)
			}
			created := createdFunction(tree.GetStmts()[0].GetStmt().GetCreateFunctionStmt())
			if created == nil {
				t.Fatalf("%s: not taken from the statement", c.sql)
			}
			ahead.PrepareCreated(created, ctx)
			keptTrees, keptRoots := ahead.bodies.len(), ahead.plpgsql.len()
			if keptTrees == 0 {
				t.Fatalf("nothing parsed ahead")
			}

			// The catalogue takes the function in, as the Manager does once the CREATE committed.
			next := uint32(0xFF000000)
			f, ok := source.cat.CreatedFunction(created, ctx, func() uint32 { next++; return next })
			if !ok {
				t.Fatal("not taken")
			}
			data := base
			data.Functions = append(append([]Function(nil), base.Functions...), f)
			source.cat = NewCatalogue(data)
			got := ahead.ClassifyIn(c.call, ctx)
			if n, m := ahead.bodies.len(), ahead.plpgsql.len(); n != keptTrees+1 || m != keptRoots {
				// +1: the body of held, which the function calls, parsed by its own first
				// analysis; nothing of the created function's is parsed again.
				t.Errorf("the analysis parsed %d body texts and %d PL/pgSQL bodies more than were parsed ahead, want none", n-keptTrees-1, m-keptRoots)
			}

			fresh := New(Options{Catalogues: &movingSource{cat: source.cat}})
			want := fresh.ClassifyIn(c.call, ctx)
			if got.Access != want.Access || got.Reason != want.Reason || got.Subject != want.Subject || got.Access != c.want {
				t.Errorf("%s after the body was parsed ahead: %v %v (%s); without: %v %v (%s); want %v", c.call, got.Access, got.Reason, got.Subject, want.Access, want.Reason, want.Subject, c.want)
			}
		})
	}
}
