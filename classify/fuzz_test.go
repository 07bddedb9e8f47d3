package classify

import (
	"reflect"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// FuzzClassify checks that no input panics, that unparseable input always fails closed, that the
// cache returns what the uncached path computes, and that the keyword fast path agrees with the
// full parse. Seeds live in testdata/fuzz/FuzzClassify.
func FuzzClassify(f *testing.F) {
	cached := New(Options{CacheSize: 64})
	uncached := New(Options{CacheSize: -1})
	f.Fuzz(func(t *testing.T, sql string) {
		effects := uncached.Classify(sql)
		if _, err := pg_query.Parse(sql); err != nil {
			if effects.Access != Write || effects.ParseError == "" {
				t.Fatalf("%q does not parse (%v) but was classified %v %v", sql, err, effects.Access, effects.Reason)
			}
		}
		checkInvariants(t, sql, effects)
		if effects.Normalized == sql && effects.ParseError != "" {
			t.Fatalf("%q: raw text of unparseable input leaked into Normalized", sql)
		}
		if again := cached.Classify(sql); !reflect.DeepEqual(again, effects) {
			t.Fatalf("%q: cached classifier disagrees:\n%+v\n%+v", sql, again, effects)
		}
		if fast, ok := uncached.classifyFast(sql); ok {
			if full := uncached.classifyFull(sql); !reflect.DeepEqual(fast, full) {
				t.Fatalf("%q: fast path %+v, full path %+v", sql, fast, full)
			}
		}
	})
}

// FuzzFunctionBody analyses random and mutated function bodies, as SQL and as PL/pgSQL, through a
// catalogue: no input panics (a recovered panic would show as "internal error"), a body the parser
// rejects makes the call a write, and the verdict is the same cached and uncached.
func FuzzFunctionBody(f *testing.F) {
	for _, seed := range []string{
		"SELECT 1", "INSERT INTO audit VALUES (1)", "SELECT nextval('s')", "DELETE FROM t; SELECT 1",
		"BEGIN RETURN 1; END", "BEGIN PERFORM audit_log('x'); RETURN 1; END", "BEGIN EXECUTE 'SELECT 1'; END",
		"DECLARE copy int := 1; BEGIN copy := copy + 1; RETURN copy; END",
		"BEGIN FOR r IN SELECT * FROM t LOOP RAISE NOTICE '%', r; END LOOP; END",
		"BEGIN RETURN QUERY SELECT id FROM t; END", "BEGIN a[f(1)] := 2; END", "BEGIN x := ; END",
		"BEGIN IF $1 > 0 THEN RETURN fz(1); END IF; RETURN 0; END", "SELECT fz()", "$$", "BEGIN RETURN NEXT; END",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, language := range []string{"sql", "plpgsql"} {
			cat := NewCatalogue(CatalogueData{Database: "fuzz", Functions: []Function{{
				OID: 1, Schema: "public", Name: "fz", Language: language, Volatility: 'v', Kind: 'f',
				Result: "integer", Source: body, ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"},
				Arguments: "n integer", Defaults: 1,
			}}, Relations: []Relation{{Schema: "public", Name: "t", Kind: 'r'}, {Schema: "public", Name: "audit", Kind: 'r'}}})
			ctx := &Context{Database: "fuzz"}
			effects := New(Options{CacheSize: -1}).ClassifyWith("SELECT fz()", ctx, cat)
			if strings.HasPrefix(effects.Subject, "internal error") {
				t.Fatalf("%s body %q: analysis panicked: %s", language, body, effects.Subject)
			}
			checkInvariants(t, "SELECT fz()", effects)
			parses := false
			if language == "sql" {
				_, err := pg_query.Parse(body)
				parses = err == nil
			} else {
				_, err := pg_query.ParsePlPgSqlToJSON(createStatement(&cat.data.Functions[0]))
				parses = err == nil || returnNextBare.MatchString(body)
			}
			if !parses && effects.Access != Write {
				t.Fatalf("%s body %q does not parse but the call was classified %v %v", language, body, effects.Access, effects.Reason)
			}
			cached := New(Options{CacheSize: 16})
			if again := cached.ClassifyWith("SELECT fz()", ctx, cat); !reflect.DeepEqual(again, effects) {
				t.Fatalf("%s body %q: cached %+v, uncached %+v", language, body, again, effects)
			}
		}
	})
}
