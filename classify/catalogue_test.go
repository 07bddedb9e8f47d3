package classify

import (
	"strconv"
	"strings"
	"testing"
)

// testCatalogue builds a catalogue by hand, standing in for one loaded from a database.
func testCatalogue() *Catalogue {
	fn := func(oid uint32, schema, name, lang string, vol byte, args []uint32, argNames []string, arguments, result, src string) Function {
		return Function{OID: oid, Schema: schema, Name: name, Language: lang, Volatility: vol, Kind: 'f',
			ArgTypes: args, ArgTypeNames: argNames, Arguments: arguments, Result: result, Source: src}
	}
	functions := []Function{
		fn(100, "public", "audit_log", "sql", 'v', []uint32{25}, []string{"text"}, "msg text", "void", "INSERT INTO audit VALUES ($1)"),
		fn(101, "public", "f_report", "plpgsql", 'v', nil, nil, "", "integer", "BEGIN PERFORM audit_log('report'); RETURN (SELECT count(*) FROM t); END"),
		fn(102, "public", "pure_sql", "sql", 'v', []uint32{23}, []string{"integer"}, "x integer", "integer", "SELECT $1 + 1"),
		fn(103, "public", "stable_writer", "plpgsql", 's', nil, nil, "", "integer", "BEGIN INSERT INTO t VALUES (1); RETURN 1; END"),
		fn(104, "public", "cfunc", "c", 'v', []uint32{23}, []string{"integer"}, "integer", "integer", "cfunc"),
		fn(105, "public", "dyn", "plpgsql", 'v', nil, nil, "", "void", "BEGIN EXECUTE 'SELECT ' || 1; END"),
		fn(106, "public", "ping", "plpgsql", 'v', []uint32{23}, []string{"integer"}, "n integer", "integer", "BEGIN IF n > 0 THEN RETURN pong(n - 1); END IF; RETURN 0; END"),
		fn(107, "public", "pong", "sql", 'v', []uint32{23}, []string{"integer"}, "n integer", "integer", "SELECT ping($1)"),
		fn(108, "public", "over", "sql", 'v', []uint32{23}, []string{"integer"}, "x integer", "integer", "SELECT $1"),
		fn(109, "public", "over", "sql", 'v', []uint32{25}, []string{"text"}, "x text", "integer", "DELETE FROM t; SELECT 1"),
		fn(110, "public", "vars", "plpgsql", 'v', nil, nil, "", "integer", "DECLARE copy int := 1; notify int; BEGIN copy := copy + 1; notify := copy; RETURN notify; END"),
		fn(111, "app", "stats", "sql", 'v', nil, nil, "", "bigint", "SELECT count(*) FROM pg_stat_activity"),
		fn(112, "public", "asserted", "c", 'v', nil, nil, "", "integer", "asserted"),
		fn(113, "public", "seq", "sql", 'v', nil, nil, "", "bigint", "SELECT nextval('s')"),
	}
	functions[13].Comment = "" // seq
	asserted := &functions[12]
	asserted.Comment = "Computes things. pgowl:readonly"
	// A chain deeper than any limit: deep0 -> deep1 -> ... -> deep29.
	for i := 0; i < 30; i++ {
		body := "SELECT 1"
		if i < 29 {
			body = "SELECT deep" + itoa(i+1) + "()"
		}
		functions = append(functions, fn(uint32(200+i), "public", "deep"+itoa(i), "sql", 'v', nil, nil, "", "integer", body))
	}
	return NewCatalogue(CatalogueData{
		Database:  "test",
		Functions: functions,
		Views: []View{
			{OID: 300, Schema: "public", Name: "v_seq", Definition: "SELECT nextval('public.s'::regclass) AS n"},
			{OID: 301, Schema: "public", Name: "v_plain", Definition: "SELECT t.id FROM public.t"},
			{OID: 302, Schema: "public", Name: "v_of_v", Definition: "SELECT v_seq.n FROM public.v_seq"},
		},
		Relations: []Relation{
			{Schema: "public", Name: "t", Kind: 'r'}, {Schema: "public", Name: "audit", Kind: 'r'}, {Schema: "public", Name: "v_seq", Kind: 'v'}, {Schema: "public", Name: "v_plain", Kind: 'v'},
			{Schema: "public", Name: "v_of_v", Kind: 'v'}, {Schema: "pg_catalog", Name: "pg_class", Kind: 'r'}, {Schema: "pg_catalog", Name: "pg_stat_activity", Kind: 'v'},
			{Schema: "public", Name: "s", Kind: 'S'},
		},
	})
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestCatalogueAnalysis(t *testing.T) {
	cat := testCatalogue()
	classifier := New(Options{CacheSize: -1})
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"$user", "public", "app"}}
	tests := []struct {
		sql     string
		access  Access
		reason  Reason
		subject string
		chain   string
	}{
		{"SELECT f_report()", Write, ReasonWritingFunction, "f_report() → audit_log(text)", "f_report() → audit_log(text) writes: INSERT INTO audit"},
		{"SELECT pure_sql(1)", Read, ReasonReadOnly, "SELECT", ""},
		// PostgreSQL refuses this INSERT in a STABLE function at run time, on
		// either node: it runs nothing, so the declaration is taken at its word.
		{"SELECT stable_writer()", Read, ReasonReadOnly, "SELECT", ""},
		{"SELECT cfunc(1)", Write, ReasonUnknownEffect, "cfunc(integer) (effect unknown: c function, VOLATILE, body cannot be analysed)", ""},
		{"SELECT dyn()", Write, ReasonWritingFunction, "dyn()", "dyn() writes: EXECUTE of dynamic SQL"},
		{"SELECT ping(3)", Read, ReasonReadOnly, "SELECT", ""},
		{"SELECT over(1)", Read, ReasonReadOnly, "SELECT", ""},
		{"SELECT over('x'::text)", Write, ReasonWritingFunction, "over(text)", ""},
		{"SELECT over($1)", Write, ReasonUnknownEffect, "over() (effect unknown: overloads differ in effect)", ""},
		{"SELECT vars()", Read, ReasonReadOnly, "SELECT", ""},
		{"SELECT stats()", Write, ReasonNodeLocalStats, "app.stats() → pg_stat_activity", ""},
		{"SELECT asserted()", Read, ReasonOverride, "asserted() asserted read-only by COMMENT ON FUNCTION ... 'pgowl:readonly'", ""},
		{"SELECT seq()", Write, ReasonWritingFunction, "seq()", "seq() writes: nextval()"},
		{"SELECT * FROM v_seq", Write, ReasonWritingFunction, "view v_seq", ""},
		{"SELECT * FROM v_of_v", Write, ReasonWritingFunction, "view v_of_v → view v_seq", ""},
		{"SELECT * FROM v_plain", Read, ReasonReadOnly, "SELECT", ""},
		{"SELECT * FROM pg_class", Read, ReasonReadOnly, "SELECT", ""},
		{"SELECT deep20()", Read, ReasonReadOnly, "SELECT", ""},
		{"SELECT deep0()", Write, ReasonNestingTooDeep, "", ""}, // after deep20..29 were memoised
		{"SELECT deep14()", Read, ReasonReadOnly, "SELECT", ""},
		{"SELECT deep13()", Write, ReasonNestingTooDeep, "", ""},
		{"SELECT nosuch()", Write, ReasonUnknownEffect, "nosuch() (effect unknown: not found on the search path)", ""},
		{"SELECT * FROM nosuch_table", Write, ReasonUnknownEffect, "", ""},
		{"WITH x AS (SELECT 1) SELECT * FROM x", Read, ReasonReadOnly, "SELECT", ""},
		{"/*pgowl:readonly*/ SELECT cfunc(1)", Read, ReasonHint, "/*pgowl:readonly*/ hint", ""},
		{"/*pgowl:primary*/ SELECT 1", Write, ReasonHint, "/*pgowl:primary*/ hint", ""},
		{"/*pgowl:readonly*/ DELETE FROM t", Write, ReasonWrite, "DELETE", ""},
	}
	for _, tc := range tests {
		got := classifier.ClassifyWith(tc.sql, ctx, cat)
		if got.Access != tc.access || got.Reason != tc.reason || (tc.subject != "" && got.Subject != tc.subject) ||
			(tc.chain != "" && got.ChainString() != tc.chain) {
			t.Errorf("%s:\n got  %v %v %q chain %q warnings %q\n want %v %v %q chain %q", tc.sql, got.Access, got.Reason, got.Subject,
				got.ChainString(), got.Warnings, tc.access, tc.reason, tc.subject, tc.chain)
		}
	}
}

func TestSplitSearchPath(t *testing.T) {
	tests := map[string][]string{
		`"$user", public`:       {"$user", "public"},
		`App,  "Mixed Case",x `: {"app", "Mixed Case", "x"},
		`""`:                    nil,
		`a, "b""c"`:             {"a", `b"c`},
		``:                      nil,
	}
	for in, want := range tests {
		got := SplitSearchPath(in)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}
