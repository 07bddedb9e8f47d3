package classify

import (
	"reflect"
	"regexp"
	"strconv"
	"testing"
)

func TestShapeOf(t *testing.T) {
	cases := []struct {
		sql, shape string
		ok         bool
	}{
		{"SELECT abalance FROM pgbench_accounts WHERE aid = 4711;", "SELECT abalance FROM pgbench_accounts WHERE aid = ?i;", true},
		{"select * from t1 where x = 'it''s' and y = 1.5e3", "select * from t1 where x = ?s and y = ?f", true},
		{"select E'a\\'b', 2", "select E?s, ?i", true},
		{"select B'101', X'1F'", "select B?b, X?b", true},
		{"select $tag$ a 'b' $tag$, $$x$$ from t", "select ?s, ?s from t", true},
		{"select \"col 1\", t2.c3 from t2 where a = $1 -- 42\n and b = 7", "select \"col 1\", t2.c3 from t2 where a = $1 -- 42\n and b = ?i", true},
		{"select /* 42 /* nested */ 'x' */ 1", "select /* 42 /* nested */ 'x' */ ?i", true},
		{"insert into t values (1, 'a')", "insert into t values (?i, ?s)", true},
		{"select f(2147483647), f(2147483649), f(9223372036854775809), f(0000000000005)", "select f(?i), f(?l), f(?n), f(?i)", true},
		// -2147483648 is an integer and 2147483648 a bigint: a unary minus decides, which a shape cannot see.
		{"select f(-2147483648)", "", false},
		{"select f(-9223372036854775808)", "", false},
		{"(select 1)", "(select ?i)", true},
		{"select a, count(*) from t where b > 5 group by 1 order by 2 desc, 1 limit 10", "select a, count(*) from t where b > ?i group by 1 order by 2 desc, 1 limit ?i", true},
		// Nothing to replace: the text is its own key.
		{"select a from t", "", false},
		// Statements whose verdict can depend on a literal are never shaped.
		{"explain (analyze 'off') delete from t where a = 1", "", false},
		{"set work_mem = '64MB'", "", false},
		{"select set_config('work_mem', '1MB', false)", "", false},
		{"select current_setting('transaction_read_only')", "", false},
		{`select U&"current\005fsetting"('work_mem')`, "", false},
		{"begin isolation level serializable", "", false},
		// Text the scanner does not understand with certainty.
		{"select 'unterminated", "", false},
		{"select 1abc", "", false},
		{"select /* open", "", false},
	}
	for _, c := range cases {
		shape, ok := shapeOf(c.sql)
		if ok != c.ok || (ok && shape != shapePrefix+c.shape) {
			t.Errorf("shapeOf(%q) = %q, %v; want %q, %v", c.sql, shape, ok, c.shape, c.ok)
		}
	}
}

// TestShapeSharingMatchesFreshClassification changes the literals of every
// golden case and checks that the verdict a shape-cache hit gives equals the
// verdict of classifying the changed statement from scratch.
func TestShapeSharingMatchesFreshClassification(t *testing.T) {
	digits := regexp.MustCompile(`[0-9]+`)
	strs := regexp.MustCompile(`'[^']*'`)
	checked := 0
	for file, cases := range loadGolden(t) {
		for _, gc := range cases {
			variant := digits.ReplaceAllString(gc.SQL, "7")
			variant = strs.ReplaceAllString(variant, "'changed'")
			if variant == gc.SQL {
				continue
			}
			warm := New(Options{})
			warm.Classify(gc.SQL) // fills the shape entry, if any
			viaShape := warm.Classify(variant)
			fresh := New(Options{CacheSize: -1}).Classify(variant)
			if !reflect.DeepEqual(viaShape, fresh) {
				t.Errorf("%s: %q after %q:\n shape cache gave %+v\n fresh parse gave %+v", file, variant, gc.SQL, viaShape, fresh)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d golden cases had literals to vary", checked)
	}
}

// BenchmarkClassifyShapeHit classifies pgbench -S statements, each with a new aid: plain Classify,
// and in_context the way a proxy session asks (ClassifyIn with a database whose catalogue is
// loaded and a search path).
func BenchmarkClassifyShapeHit(b *testing.B) {
	// More distinct statements than the cache holds, as pgbench -S sends them.
	sqls := make([]string, 4*DefaultCacheSize)
	for i := range sqls {
		sqls[i] = "SELECT abalance FROM pgbench_accounts WHERE aid = " + strconv.Itoa(i) + ";"
	}
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"$user", "public"}}
	for _, bm := range []struct {
		name     string
		classify func(c *Classifier, sql string)
	}{
		{"plain", func(c *Classifier, sql string) { c.Classify(sql) }},
		{"in_context", func(c *Classifier, sql string) { c.ClassifyIn(sql, ctx) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			c := New(Options{Catalogues: staticSource{testCatalogue()}})
			bm.classify(c, "SELECT abalance FROM pgbench_accounts WHERE aid = 1;")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bm.classify(c, sqls[i%len(sqls)])
			}
		})
	}
}

func TestMentionsSettingCall(t *testing.T) {
	for sql, want := range map[string]bool{
		"select set_config('a', 'b', false)":              true,
		"SELECT SET_CONFIG('a', 'b', false)":              true,
		"select current_setting('transaction_read_only')": true,
		"select x from t where y = Current_Setting('a')":  true,
		"select a_b from set_configx":                     true, // conservative: the name is there
		"select abalance from pgbench_accounts":           false,
		"select _config, setting_ from t":                 false,
		"set_config":                                      true,
		"current_setting":                                 true,
		"_":                                               false,
	} {
		if got := mentionsSettingCall(sql); got != want {
			t.Errorf("mentionsSettingCall(%q) = %v, want %v", sql, got, want)
		}
	}
}
