package classify

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
)

func TestLRUCacheEvictsLeastRecentlyUsed(t *testing.T) {
	cache := newLRUCache(3) // three shards of one entry would hide LRU order, so use one shard below
	single := &lruCache{seed: cache.seed, shards: cache.shards[:1]}
	single.shards[0].capacity = 3
	mark := func(n int) Effects { return Effects{Statements: n} }
	single.add("a", mark(1), false)
	single.add("b", mark(2), false)
	single.add("c", mark(3), false)
	if _, _, ok := single.get("a"); !ok { // a becomes most recently used; b is now the oldest
		t.Fatal("a missing")
	}
	single.add("d", mark(4), false)
	if _, _, ok := single.get("b"); ok {
		t.Error("b should have been evicted")
	}
	for key, want := range map[string]int{"a": 1, "c": 3, "d": 4} {
		got, _, ok := single.get(key)
		if !ok || got.Statements != want {
			t.Errorf("%s: got %v %v, want %d", key, got.Statements, ok, want)
		}
	}
	single.add("c", mark(30), false) // update in place
	if got, _, _ := single.get("c"); got.Statements != 30 {
		t.Errorf("update lost: %d", got.Statements)
	}
	if n := single.len(); n != 3 {
		t.Errorf("len %d, want 3", n)
	}
	single.purge()
	if n := single.len(); n != 0 {
		t.Errorf("len after purge %d", n)
	}
}

func TestLRUCacheIsBounded(t *testing.T) {
	for _, size := range []int{1, 5, 16, 17, 100, 1000} {
		cache := newLRUCache(size)
		for i := 0; i < size*5; i++ {
			cache.add(fmt.Sprintf("SELECT %d", i), Effects{Statements: i}, false)
		}
		if n := cache.len(); n > size {
			t.Errorf("size %d: holds %d entries", size, n)
		}
		if n := cache.len(); size >= 16 && n < size*9/10 {
			t.Errorf("size %d: holds only %d entries; shards are badly balanced", size, n)
		}
	}
}

func TestClassifierCacheOptions(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		wantCached bool
		sql        string
	}{
		{"default", Options{}, true, "SELECT 1"},
		{"disabled", Options{CacheSize: -1}, false, "SELECT 1"},
		{"too long to cache", Options{MaxCachedSQLBytes: 8}, false, "SELECT 1 + 1"},
		{"short enough", Options{MaxCachedSQLBytes: 8}, true, "SELECT 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			classifier := New(tc.opts)
			first := classifier.Classify(tc.sql)
			cached := false
			if classifier.cache != nil {
				_, _, cached = classifier.cache.get(tc.sql)
			}
			if cached != tc.wantCached {
				t.Fatalf("cached = %v, want %v", cached, tc.wantCached)
			}
			if second := classifier.Classify(tc.sql); !reflect.DeepEqual(first, second) {
				t.Errorf("second answer differs: %+v vs %+v", first, second)
			}
			classifier.Purge()
			if classifier.cache != nil && classifier.cache.len() != 0 {
				t.Error("Purge left entries")
			}
		})
	}
}

// TestClassifyConcurrent hammers one small classifier from several goroutines (run with -race);
// every answer must equal the uncached one.
func TestClassifyConcurrent(t *testing.T) {
	statements := []string{
		"SELECT 1", "BEGIN", "COMMIT", "SELECT nextval('s')", "UPDATE t SET n = 1", "SET pgowl.notice = off",
		"SELECT * FROM t FOR UPDATE", "SELEC broken", "SHOW x", "WITH d AS (DELETE FROM t RETURNING 1) SELECT 1",
	}
	reference := New(Options{CacheSize: -1})
	want := make(map[string]Effects, len(statements))
	for _, sql := range statements {
		want[sql] = reference.Classify(sql)
	}
	classifier := New(Options{CacheSize: 4}) // smaller than the working set: constant eviction
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for worker := 0; worker < 8; worker++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				sql := statements[(i*7+worker)%len(statements)]
				if got := classifier.Classify(sql); !reflect.DeepEqual(got, want[sql]) {
					select {
					case errs <- fmt.Sprintf("%q: %+v, want %+v", sql, got, want[sql]):
					default:
					}
					return
				}
			}
		}(worker)
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}

func TestCachedHitDoesNotAllocate(t *testing.T) {
	classifier := New(Options{})
	sql := "SELECT abalance FROM pgbench_accounts WHERE aid = 42"
	classifier.Classify(sql)
	allocs := testing.AllocsPerRun(1000, func() { classifier.Classify(sql) })
	if allocs != 0 {
		t.Errorf("cached Classify allocates %.1f times per call", allocs)
	}
}

// TestCachedCatalogueHitDoesNotAllocate: a statement whose verdict depends on the catalogue and the
// search path is looked up by a context key built on the stack; a hit allocates nothing and costs
// no catalogue work.
func TestCachedCatalogueHitDoesNotAllocate(t *testing.T) {
	classifier := New(Options{Catalogues: staticSource{testCatalogue()}})
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"$user", "public"}, ParamTypes: []uint32{23}}
	sql := "SELECT f_report(), pure_sql($1) FROM t"
	first := classifier.ClassifyIn(sql, ctx)
	allocs := testing.AllocsPerRun(1000, func() { classifier.ClassifyIn(sql, ctx) })
	if allocs != 0 {
		t.Errorf("cached ClassifyIn allocates %.1f times per call", allocs)
	}
	other := &Context{Database: "other", User: "app"}
	if got := classifier.ClassifyIn(sql, other); reflect.DeepEqual(got, first) {
		t.Errorf("a verdict made with one database's catalogue was shared with another database")
	}
	path := &Context{Database: "test", User: "app", SearchPath: []string{"lib"}, ParamTypes: []uint32{23}}
	if got := classifier.ClassifyIn(sql, path); got.Reason != ReasonUnknownEffect {
		t.Errorf("with a search path that does not hold f_report: %v, want UNKNOWN_EFFECT (the verdict must not be shared across search paths)", got.Reason)
	}
}

// TestShapeHitDoesNotAllocate: statements that differ only in literals (pgbench -M simple) find
// their shape's verdict with the shape built in stack buffers, with and without a context. A shape
// hit does not cache the exact text, so repeating one text exercises the shape path every time.
func TestShapeHitDoesNotAllocate(t *testing.T) {
	classifier := New(Options{Catalogues: staticSource{testCatalogue()}})
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"$user", "public"}}
	classifier.ClassifyIn("SELECT v FROM t WHERE id = 1", ctx)
	classifier.Classify("SELECT abalance FROM pgbench_accounts WHERE aid = 1")
	allocs := testing.AllocsPerRun(1000, func() {
		classifier.ClassifyIn("SELECT v FROM t WHERE id = 7", ctx)
		classifier.Classify("SELECT abalance FROM pgbench_accounts WHERE aid = 7")
	})
	if allocs != 0 {
		t.Errorf("a shape hit allocates %.1f times per call", allocs)
	}
	if got, want := classifier.ClassifyIn("SELECT v FROM t WHERE id = 7", ctx), classifier.ClassifyIn("SELECT v FROM t WHERE id = 1", ctx); !reflect.DeepEqual(got, want) {
		t.Errorf("shape hit %+v differs from the verdict of its first statement %+v", got, want)
	}
}

// TestShapeVerdictsFollowTheContext: a statement whose verdict depends on the search path, with
// new literals each time and with a text seen before, gets the verdict of its own context whichever
// of the text, the shape or the context-keyed entries the cache already holds.
func TestShapeVerdictsFollowTheContext(t *testing.T) {
	classifier := New(Options{Catalogues: staticSource{testCatalogue()}})
	public := &Context{Database: "test", User: "app", SearchPath: []string{"$user", "public"}}
	lib := &Context{Database: "test", User: "app", SearchPath: []string{"lib"}}
	steps := []struct {
		sql  string
		ctx  *Context
		want Reason
	}{
		{"SELECT f_report() FROM t WHERE id = 1", public, ReasonWritingFunction},
		{"SELECT f_report() FROM t WHERE id = 2", public, ReasonWritingFunction}, // shape, same context
		{"SELECT f_report() FROM t WHERE id = 3", lib, ReasonUnknownEffect},      // shape, new context
		{"SELECT f_report() FROM t WHERE id = 1", lib, ReasonUnknownEffect},      // known text, new context
		{"SELECT f_report() FROM t WHERE id = 4", lib, ReasonUnknownEffect},      // shape, second context
		{"SELECT f_report() FROM t WHERE id = 1", public, ReasonWritingFunction}, // known text, first context
		{"SELECT f_report() FROM t WHERE id = 5", public, ReasonWritingFunction}, // shape, first context again
		{"SELECT f_report() FROM t WHERE id = 'x'", lib, ReasonUnknownEffect},    // another literal kind
		{"SELECT f_report() FROM t WHERE id = 'y'", public, ReasonWritingFunction},
	}
	for _, step := range steps {
		if got := classifier.ClassifyIn(step.sql, step.ctx); got.Reason != step.want {
			t.Errorf("%s with search_path %v: %v, want %v", step.sql, step.ctx.SearchPath, got.Reason, step.want)
		}
	}
}
