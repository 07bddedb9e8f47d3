package classify

import (
	"fmt"
	"maps"
	"math/rand"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// review9Source is a CatalogueSource whose catalogues can be swapped (a reload with new content),
// so that the catalogue version in the context key changes between statements.
type review9Source struct {
	mu   sync.Mutex
	cats map[string]*Catalogue
}

func (s *review9Source) Catalogue(database string) *Catalogue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cats[database]
}
func (s *review9Source) Lookup(string, *Catalogue, string) (*Catalogue, bool) { return nil, true }
func (s *review9Source) Changed(string, *CatalogueChanges, bool)              {}

func (s *review9Source) Held(database string) (*Catalogue, bool) { return s.Catalogue(database), true }
func (s *review9Source) set(database string, cat *Catalogue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cats[database] = cat
}

// review9Catalogue is testCatalogue's data for database, optionally changed: with writers, f_report
// only reads, pure_sql deletes, and an operator ===, a cast to mytype and a row function f run the
// writing function audit_log.
func review9Catalogue(database string, writers bool) *Catalogue {
	d := testCatalogue().data
	d.Database = database
	d.Functions = append([]Function(nil), d.Functions...)
	d.Views = append([]View(nil), d.Views...)
	d.Relations = append([]Relation(nil), d.Relations...)
	if writers {
		for i := range d.Functions {
			switch d.Functions[i].Name {
			case "f_report":
				d.Functions[i].Source = "BEGIN RETURN 1; END"
			case "pure_sql":
				d.Functions[i].Source = "DELETE FROM t; SELECT 1"
			}
		}
		d.Functions = append(d.Functions,
			Function{OID: 900, Schema: "public", Name: "opwriter", Language: "sql", Volatility: 'v', Kind: 'f',
				ArgTypes: []uint32{23, 23}, ArgTypeNames: []string{"integer", "integer"}, Arguments: "integer, integer",
				Result: "integer", Source: "INSERT INTO audit VALUES ('x'); SELECT 1"},
			Function{OID: 901, Schema: "public", Name: "castwriter", Language: "sql", Volatility: 'v', Kind: 'f',
				ArgTypes: []uint32{23}, ArgTypeNames: []string{"integer"}, Arguments: "integer",
				Result: "mytype", Source: "INSERT INTO audit VALUES ('x'); SELECT NULL::mytype"},
		)
		d.Types = append(append([]Type(nil), d.Types...), Type{OID: 5000, Schema: "public", Name: "mytype", Kind: 'b'})
		d.Operators = append(append([]Operator(nil), d.Operators...), Operator{Schema: "public", Name: "===", Function: 900})
		d.Casts = append(append([]Cast(nil), d.Casts...), Cast{Source: 23, Target: 5000, Function: 901})
	}
	return NewCatalogue(d)
}

// review9Verdict is the part of the effects that routes a statement.
func review9Verdict(e Effects) string {
	return fmt.Sprintf("%v %v tx=%v session=%v subject=%q", e.Access, e.Reason, e.Tx, e.Session, e.Subject)
}

// TestCacheCarriageReturnCommentShape: PostgreSQL ends a -- comment at \r as well as at \n
// (scan.l: non_newline is [^\n\r]), the shape scanner only at \n. A quote after the \r is code to
// PostgreSQL but comment to the scanner, so the scanner's idea of what is quoted is shifted: a
// DELETE (or FOR UPDATE) after it is "inside a string" to the scanner and replaced by ?s, and the
// statement shares the shape, and the cached read verdict, of a harmless statement.
func TestCacheCarriageReturnCommentShape(t *testing.T) {
	pairs := [][2]string{
		{"SELECT 1 --\r, '\n' ; SELECT 42 -- '\n", "SELECT 1 --\r, '\n' ; DELETE FROM t -- '\n"},
		{"SELECT 1 --\r, '\n' FROM t -- '\n", "SELECT 1 --\r, '\n' FROM t FOR UPDATE -- '\n"},
	}
	review9SharedShapeReadThenWrite(t, pairs)
}

// TestCacheDollarQuoteAfterQuotedIdentifierShape: after a quoted identifier the scanner
// takes '$' for an identifier byte (prevIdent is true), so "text"$a$...$a$, a typed literal to
// PostgreSQL (func_name Sconst), is not read as a dollar quote: its quote characters shift the
// scanner's idea of what is quoted, a DELETE is replaced by ?s, and the write shares the shape, and
// the cached read verdict, of a harmless statement.
func TestCacheDollarQuoteAfterQuotedIdentifierShape(t *testing.T) {
	review9SharedShapeReadThenWrite(t, [][2]string{
		{`SELECT "text"$a$'$a$ ; SELECT 2 -- '`, `SELECT "text"$a$'$a$ ; DELETE FROM t -- '`},
		{`SELECT "text"$a$'$a$ FROM t -- '`, `SELECT "text"$a$'$a$ FROM t FOR UPDATE -- '`},
	})
}

// review9SharedShapeReadThenWrite classifies each pair's reader, then its writer, through one cache,
// and expects the writer's fresh verdict.
func review9SharedShapeReadThenWrite(t *testing.T, pairs [][2]string) {
	t.Helper()
	fresh := New(Options{CacheSize: -1})
	for _, pair := range pairs {
		reader, writer := pair[0], pair[1]
		if got := fresh.Classify(reader); got.Access != Read {
			t.Fatalf("%q: fresh verdict %s, want a read (test premise)", reader, review9Verdict(got))
		}
		want := fresh.Classify(writer)
		if want.Access != Write {
			t.Fatalf("%q: fresh verdict %s, want a write (test premise)", writer, review9Verdict(want))
		}
		cached := New(Options{})
		cached.Classify(reader)
		if got := cached.Classify(writer); got.Access != want.Access || got.Reason != want.Reason {
			rs, _ := shapeOf(reader)
			ws, _ := shapeOf(writer)
			t.Errorf("%q after %q: cached %s, fresh %s (shapes %q and %q)", writer, reader,
				review9Verdict(got), review9Verdict(want), rs, ws)
		}
	}
}

// TestCacheVerdictWithoutCatalogueIsNotContextFree: without a catalogue (a database whose
// catalogue is not loaded yet or failed to load, or Classify without a context) an operator, a
// cast or a field selection only reads, and resolveOperator / resolveCast / resolveAttribute do not
// mark that verdict as depending on the context. It is cached by text (and shape) as a
// context-free read, and a session of a database whose catalogue has a writing operator, cast or
// row function then gets that read instead of the write a fresh classification gives.
func TestCacheVerdictWithoutCatalogueIsNotContextFree(t *testing.T) {
	source := &review9Source{cats: map[string]*Catalogue{"test": review9Catalogue("test", true)}}
	withCat := &Context{Database: "test", User: "app", SearchPath: []string{"$user", "public"}}
	noCat := &Context{Database: "loading", User: "app", SearchPath: []string{"$user", "public"}}
	fresh := New(Options{CacheSize: -1, Catalogues: source})
	for _, sql := range []string{"SELECT 1 === 2", "SELECT 1::mytype", "SELECT 7 OPERATOR(public.===) 8"} {
		want := fresh.ClassifyIn(sql, withCat)
		if want.Access != Write {
			t.Fatalf("%q in %q: fresh verdict %s, want a write (test premise)", sql, withCat.Database, review9Verdict(want))
		}
		for _, first := range []string{"ClassifyIn other database", "Classify"} {
			cached := New(Options{Catalogues: source})
			if first == "Classify" {
				cached.Classify(sql)
			} else {
				cached.ClassifyIn(sql, noCat)
			}
			// The same text, and the same shape with other literals.
			for _, again := range []string{sql, review9VaryLiterals(sql, rand.New(rand.NewSource(1)))} {
				wantAgain := fresh.ClassifyIn(again, withCat)
				if got := cached.ClassifyIn(again, withCat); got.Access != wantAgain.Access || got.Reason != wantAgain.Reason {
					t.Errorf("%q in %q after %q (%s): cached %s, fresh %s", again, withCat.Database, sql, first,
						review9Verdict(got), review9Verdict(wantAgain))
				}
			}
		}
	}
}

var (
	review9Int    = regexp.MustCompile(`(^|[^A-Za-z0-9_$."'])([0-9]+)([^A-Za-z0-9_$.]|$)`)
	review9String = regexp.MustCompile(`'[a-z]{1,8}'`)
)

// review9VaryLiterals replaces short integers and simple strings of sql by others of the same kind.
func review9VaryLiterals(sql string, rng *rand.Rand) string {
	sql = review9Int.ReplaceAllStringFunc(sql, func(m string) string {
		sub := review9Int.FindStringSubmatch(m)
		if len(sub[2]) > 9 {
			return m
		}
		return sub[1] + strconv.Itoa(3+rng.Intn(900000)) + sub[3]
	})
	return review9String.ReplaceAllStringFunc(sql, func(string) string {
		return "'" + string(rune('a'+rng.Intn(26))) + string(rune('a'+rng.Intn(26))) + "'"
	})
}

// review9Statements are the golden statements, the catalogue statements of the tests, and
// statements whose verdict depends on the catalogue through operators, casts and row functions.
func review9Statements(t *testing.T) []string {
	seen := map[string]bool{}
	var out []string
	add := func(sql string) {
		if !seen[sql] {
			seen[sql] = true
			out = append(out, sql)
		}
	}
	tables := loadGolden(t)
	for _, path := range slices.Sorted(maps.Keys(tables)) {
		for _, tc := range tables[path] {
			add(tc.SQL)
		}
	}
	for _, sql := range []string{
		"SELECT f_report() FROM t WHERE id = 1", "SELECT f_report()", "SELECT pure_sql(1)", "SELECT pure_sql(id) FROM t WHERE id = 42",
		"SELECT stable_writer()", "SELECT cfunc(1)", "SELECT over(1)", "SELECT over('x'::text)", "SELECT over('x')", "SELECT over($1)",
		"SELECT stats()", "SELECT asserted()", "SELECT seq()", "SELECT * FROM v_seq WHERE n = 1", "SELECT * FROM v_of_v LIMIT 1",
		"SELECT * FROM v_plain WHERE id = 1", "SELECT id FROM t WHERE id = 3", "SELECT 1 === 2", "SELECT id === 2 FROM t",
		"SELECT 1::mytype", "SELECT x FROM t WHERE id = 1::mytype", "SELECT app.stats() WHERE 1 = 1", "SELECT deep20()",
		"SELECT deep13() WHERE 1 = 1", "SELECT nosuch(1)", "SELECT * FROM nosuch_table WHERE a = 1", "SELECT 1 --\r, '\n' ; SELECT 42 -- '\n",
		"SELECT 1 --\r, '\n' ; DELETE FROM t -- '\n", "SELECT abalance FROM pgbench_accounts WHERE aid = 1",
	} {
		add(sql)
	}
	return out
}

// TestCacheMatchesFreshClassification classifies golden statements, with their literals
// varied, through cached classifiers (default and tiny caches) in several contexts (no context,
// two search paths, unknown search path, parameter types, a database without a catalogue, a
// database whose catalogue is swapped for one with other content) in a seeded random order, and
// compares every verdict with a classifier without a cache in the same state.
func TestCacheMatchesFreshClassification(t *testing.T) {
	statements := review9Statements(t)
	plain, changed := review9Catalogue("test", false), review9Catalogue("test", true)
	otherPlain, otherChanged := review9Catalogue("other", false), review9Catalogue("other", true)
	source := &review9Source{cats: map[string]*Catalogue{"test": plain, "other": otherChanged}}
	contexts := []*Context{
		nil,
		{Database: "test", User: "app", SearchPath: []string{"$user", "public"}},
		{Database: "test", User: "app", SearchPath: []string{"lib"}},
		{Database: "test", User: "app", SearchPathUnknown: true},
		{Database: "test", User: "app", SearchPath: []string{"public"}, ParamTypes: []uint32{25}},
		{Database: "other", User: "app"},
		{Database: "nocat", User: "app", SearchPath: []string{"$user", "public"}},
	}
	fresh := New(Options{CacheSize: -1, Catalogues: source})
	var mismatches []string
	seenKey := map[string]bool{}
	for _, size := range []int{0, 1, 3, 7} {
		rng := rand.New(rand.NewSource(int64(9 + size)))
		cached := New(Options{CacheSize: size, Catalogues: source})
		source.set("test", plain)
		source.set("other", otherChanged)
		steps := 6000
		for step := 0; step < steps; step++ {
			if rng.Intn(400) == 0 {
				if source.Catalogue("test") == plain {
					source.set("test", changed)
					source.set("other", otherPlain)
				} else {
					source.set("test", plain)
					source.set("other", otherChanged)
				}
			}
			sql := statements[rng.Intn(len(statements))]
			if rng.Intn(2) == 0 {
				sql = review9VaryLiterals(sql, rng)
			}
			ctx := contexts[rng.Intn(len(contexts))]
			var got, want Effects
			if ctx == nil {
				got, want = cached.Classify(sql), fresh.Classify(sql)
			} else {
				got, want = cached.ClassifyIn(sql, ctx), fresh.ClassifyIn(sql, ctx)
			}
			if got.Access != want.Access || got.Reason != want.Reason || got.Tx != want.Tx || got.Session != want.Session {
				key := fmt.Sprintf("%v/%v->%v/%v", want.Access, want.Reason, got.Access, got.Reason)
				db := "<nil>"
				if ctx != nil {
					db = fmt.Sprintf("%s %v unknown=%v params=%v", ctx.Database, ctx.SearchPath, ctx.SearchPathUnknown, ctx.ParamTypes)
				}
				detail := fmt.Sprintf("cache size %d, step %d, %q in %s: cached %s, fresh %s", size, step, sql, db,
					review9Verdict(got), review9Verdict(want))
				if !seenKey[key+sql] && len(mismatches) < 30 {
					seenKey[key+sql] = true
					mismatches = append(mismatches, detail)
				}
			}
		}
	}
	for _, m := range mismatches {
		t.Error(m)
	}
}

// TestCacheConcurrentMatchesFresh runs the comparison from several goroutines on one cached
// classifier with a fixed catalogue and a small cache (evictions), for the race detector and for
// verdicts that depend on the order the goroutines fill the cache in.
func TestCacheConcurrentMatchesFresh(t *testing.T) {
	// Without the statements the shape tests above show sharing a shape with a write, so that the
	// result does not depend on the order the goroutines run in.
	var statements []string
	for _, sql := range review9Statements(t) {
		if !strings.Contains(sql, "\r") && !strings.Contains(sql, "$a$") {
			statements = append(statements, sql)
		}
	}
	source := &review9Source{cats: map[string]*Catalogue{"test": review9Catalogue("test", false)}}
	contexts := []*Context{
		{Database: "test", User: "app", SearchPath: []string{"$user", "public"}},
		{Database: "test", User: "app", SearchPath: []string{"lib"}},
		{Database: "test", User: "app", SearchPathUnknown: true},
	}
	fresh := New(Options{CacheSize: -1, Catalogues: source})
	want := make(map[string]string)
	for _, sql := range statements {
		for i, ctx := range contexts {
			want[strconv.Itoa(i)+"\x00"+sql] = review9Verdict(fresh.ClassifyIn(sql, ctx))
		}
	}
	cached := New(Options{CacheSize: 64, Catalogues: source})
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(100 + g)))
			for step := 0; step < 600; step++ {
				sql := statements[rng.Intn(len(statements))]
				i := rng.Intn(len(contexts))
				got := review9Verdict(cached.ClassifyIn(sql, contexts[i]))
				// Subjects may legitimately carry the first statement of a shape's literals: compare routing only.
				if w := want[strconv.Itoa(i)+"\x00"+sql]; strings.SplitN(got, " subject=", 2)[0] != strings.SplitN(w, " subject=", 2)[0] {
					select {
					case errs <- fmt.Sprintf("%q in context %d: cached %s, fresh %s", sql, i, got, w):
					default:
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	seen := map[string]bool{}
	for e := range errs {
		if !seen[e] {
			seen[e] = true
			t.Error(e)
		}
	}
}
