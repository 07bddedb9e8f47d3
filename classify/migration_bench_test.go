package classify

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkMigrationChangeThenUse replays, without a server, what the classifier does for each pair
// of integration/migrationbench's script: a function is added to the catalogue (DeriveCatalogue with
// the function added, analyses kept as a session's read keeps them), then the statement that
// calls it is classified (a new text: nothing cached). Functions alternate between PL/pgSQL and SQL
// calling the previous one, as in the script. It reports the time of each half per pair. The
// catalogue starts over every held functions (sub-benchmarks): 200 is one run of the script in a
// new schema; 3000 is the catalogue of fifteen such runs, which a proxy holds when their schemas
// are dropped outside it, until its next whole read (classify.refresh_interval).
func BenchmarkMigrationChangeThenUse(b *testing.B) {
	for _, held := range []int{200, 3000} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) { benchmarkChangeThenUse(b, held) })
	}
}

func benchmarkChangeThenUse(b *testing.B, held int) {
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"public"}}
	base := testCatalogue()
	source := &movingSource{cat: base}
	classifier := New(Options{Catalogues: source})
	var patchTime, useTime time.Duration
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if i%held == 0 {
			base = testCatalogue() // a whole read, or a new schema every 200 functions at held=200
		}
		n := i % 200
		name := fmt.Sprintf("m_%d_%d", i/200, n)
		f := Function{OID: uint32(100000 + i), Schema: "public", Name: name, Kind: 'f',
			ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"}, ArgNames: []string{"x"}, Arguments: "x integer", Result: "integer"}
		if n%2 == 0 {
			f.Language, f.Volatility = "plpgsql", 'v'
			f.Source = fmt.Sprintf("\nDECLARE\n  result integer;\nBEGIN\n  SELECT x + %d INTO result;\n  RETURN result;\nEND\n", n)
		} else {
			f.Language, f.Volatility = "sql", 's'
			f.Source = fmt.Sprintf(" SELECT m_%d_%d(x) + 1 ", i/200, n-1)
		}
		started := time.Now()
		data := *base.Data()
		data.Functions = base.AppendedFunctions([]Function{f})
		cat := DeriveCatalogue(base, data, &CatalogueDelta{Parts: CatalogueParts{Functions: true}, AddedFunctions: []Function{f}})
		cat.KeepAnalysesFrom(base, []string{f.Name})
		base = cat
		patchTime += time.Since(started)
		started = time.Now()
		source.cat = cat
		if got := classifier.ClassifyIn(fmt.Sprintf("SELECT %s(%d)", name, i), ctx); got.Access != Read {
			b.Fatalf("SELECT %s: %v %s", name, got.Access, got.Subject)
		}
		useTime += time.Since(started)
	}
	b.ReportMetric(float64(patchTime.Microseconds())/float64(b.N), "µs/patch")
	b.ReportMetric(float64(useTime.Microseconds())/float64(b.N), "µs/use")
}

// movingSource holds the current catalogue of database "test" as a Manager does after a patch.
type movingSource struct{ cat *Catalogue }

func (s *movingSource) Catalogue(string) *Catalogue                          { return s.cat }
func (s *movingSource) Lookup(string, *Catalogue, string) (*Catalogue, bool) { return nil, true }
func (s *movingSource) Changed(string, *CatalogueChanges, bool)              {}
func (s *movingSource) Held(string) (*Catalogue, bool)                       { return s.cat, true }
