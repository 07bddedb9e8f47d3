package classify

import (
	"testing"
	"time"
)

// benchmarkStatements are a typical pgbench statement, a three-table join and a trivial statement
// that the keyword fast path handles on a miss.
var benchmarkStatements = []struct {
	name string
	sql  string
}{
	{"pgbench_update", "UPDATE pgbench_accounts SET abalance = abalance + 5 WHERE aid = 42"},
	{"pgbench_select", "SELECT abalance FROM pgbench_accounts WHERE aid = 42"},
	{"join3", "SELECT c.name, o.id, sum(i.price) FROM customers c JOIN orders o ON o.customer_id = c.id JOIN items i ON i.order_id = o.id WHERE c.region = 'eu' GROUP BY c.name, o.id ORDER BY 3 DESC LIMIT 10"},
	{"begin_fastpath", "BEGIN"},
	{"set_fastpath", "SET application_name = 'pgbench'"},
}

func BenchmarkClassifyCached(b *testing.B) {
	for _, bm := range benchmarkStatements {
		b.Run(bm.name, func(b *testing.B) {
			classifier := New(Options{})
			classifier.Classify(bm.sql)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				classifier.Classify(bm.sql)
			}
		})
	}
}

func BenchmarkClassifyCachedParallel(b *testing.B) {
	classifier := New(Options{})
	for _, bm := range benchmarkStatements {
		classifier.Classify(bm.sql)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			classifier.Classify(benchmarkStatements[i%len(benchmarkStatements)].sql)
			i++
		}
	})
}

func BenchmarkClassifyUncached(b *testing.B) {
	for _, bm := range benchmarkStatements {
		b.Run(bm.name, func(b *testing.B) {
			classifier := New(Options{CacheSize: -1})
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				classifier.Classify(bm.sql)
			}
		})
	}
}

// BenchmarkClassifyFullPath measures the trivial statements without the fast path, to show what it saves.
func BenchmarkClassifyFullPath(b *testing.B) {
	classifier := New(Options{CacheSize: -1})
	for _, bm := range benchmarkStatements[3:] {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				classifier.classifyFull(bm.sql)
			}
		})
	}
}

// BenchmarkGolden classifies every golden case without the cache.
func BenchmarkGolden(b *testing.B) {
	var statements []string
	for _, cases := range loadGoldenForBenchmark(b) {
		for _, tc := range cases {
			statements = append(statements, tc.SQL)
		}
	}
	classifier := New(Options{CacheSize: -1})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		classifier.Classify(statements[i%len(statements)])
	}
}

// staticSource is a CatalogueSource holding one database's catalogue, as a loaded Manager does.
type staticSource struct{ cat *Catalogue }

func (s staticSource) Catalogue(database string) *Catalogue {
	if database != s.cat.Database() {
		return nil
	}
	return s.cat
}
func (s staticSource) Lookup(string, *Catalogue, string) (*Catalogue, bool) { return nil, true }
func (s staticSource) Changed(string, *CatalogueChanges, bool)              {}

func (s staticSource) Held(database string) (*Catalogue, bool) { return s.Catalogue(database), true }

// catalogueStatements call user functions that the catalogue resolves: a PL/pgSQL function that
// calls a writing SQL function, and a reading SQL function in a pgbench-like read.
var catalogueStatements = []struct {
	name string
	sql  string
}{
	{"plpgsql_chain", "SELECT f_report()"},
	{"sql_reader", "SELECT id, pure_sql(id) FROM t WHERE id = 42"},
	{"view", "SELECT * FROM v_of_v"},
}

// BenchmarkClassifyCatalogue classifies statements with user functions through a catalogue, the way
// a proxy session does (ClassifyIn with a catalogue source and a search path): cached (the
// statement's verdict is in the cache), uncached with the function analyses memoised on the
// catalogue, and uncached with a cold memo (every function body parsed again).
func BenchmarkClassifyCatalogue(b *testing.B) {
	cat := testCatalogue()
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"$user", "public"}}
	for _, bm := range catalogueStatements {
		b.Run("cached/"+bm.name, func(b *testing.B) {
			classifier := New(Options{Catalogues: staticSource{cat}})
			classifier.ClassifyIn(bm.sql, ctx)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				classifier.ClassifyIn(bm.sql, ctx)
			}
		})
		b.Run("uncached_memoised/"+bm.name, func(b *testing.B) {
			classifier := New(Options{CacheSize: -1, Catalogues: staticSource{cat}})
			classifier.ClassifyIn(bm.sql, ctx)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				classifier.ClassifyIn(bm.sql, ctx)
			}
		})
		b.Run("uncached_cold/"+bm.name, func(b *testing.B) {
			classifier := New(Options{CacheSize: -1, Catalogues: staticSource{cat}})
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				cat.memo.Clear()
				classifier.ClassifyIn(bm.sql, ctx)
			}
		})
	}
}

// changedSource is a CatalogueSource that always has a change pending, as a Manager has right after
// a statement changed the catalogue: Held reports its catalogue not current, and Catalogue (the
// wait for the read) answers at once, noting when it did.
type changedSource struct {
	cat      *Catalogue
	answered time.Time
}

func (s *changedSource) Catalogue(string) *Catalogue {
	s.answered = time.Now()
	return s.cat
}
func (s *changedSource) Lookup(string, *Catalogue, string) (*Catalogue, bool) { return nil, true }
func (s *changedSource) Changed(string, *CatalogueChanges, bool)              {}
func (s *changedSource) Held(string) (*Catalogue, bool)                       { return s.cat, false }

// BenchmarkClassifyAfterChange classifies a statement that uses user functions right after a change
// (a new catalogue: cold memo), and reports how much of it comes after the catalogue read is done
// (µs/after-read): the part a statement adds to the read it waits for. What it computes without the
// catalogue (the attempt to classify without it) overlaps the read.
func BenchmarkClassifyAfterChange(b *testing.B) {
	cat := testCatalogue()
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"$user", "public"}}
	for _, bm := range catalogueStatements {
		b.Run(bm.name, func(b *testing.B) {
			source := &changedSource{cat: cat}
			classifier := New(Options{CacheSize: -1, Catalogues: source})
			var afterRead time.Duration
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				cat.memo.Clear()
				classifier.ClassifyIn(bm.sql, ctx)
				afterRead += time.Since(source.answered)
			}
			b.ReportMetric(float64(afterRead.Nanoseconds())/float64(b.N)/1000, "µs/after-read")
		})
	}
}
