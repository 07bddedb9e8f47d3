package classify

import (
	"reflect"
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
