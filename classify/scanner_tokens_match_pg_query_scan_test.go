package classify

import (
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// scanSQL gives the tokens pg_query.Scan gives (proto.Unmarshal of the same encoding), in the same
// order, for every statement of the testdata corpus, pg_query's normalised text of each, and texts
// that exercise what the labels mask: comments, every kind of literal, keywords of each kind,
// parameters, and a text the scanner refuses.
func TestScannerTokensMatchPgQueryScan(t *testing.T) {
	texts := []string{"", " ", "SELECT 1 -- end", "/* c */ SELECT E'x\\n', B'01', X'ff', 1.5e3, $1, $$body$$",
		"SET LOCAL work_mem = '64MB'", "ALTER ROLE r SET search_path TO a, \"B\"", "select u&'\\0041' from \"T\"",
		"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", "SELECT 'unterminated", "SELECT é FROM t"}
	for _, sql := range walkCorpus(t) {
		texts = append(texts, sql)
		if normalized, err := pg_query.Normalize(sql); err == nil {
			texts = append(texts, normalized)
		}
	}
	compared := 0
	for _, text := range texts {
		want, wantErr := pg_query.Scan(text)
		got, err := scanSQL(text)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: scanSQL error %v, pg_query.Scan error %v", text, err, wantErr)
		}
		if err != nil {
			continue
		}
		if len(got) != len(want.GetTokens()) {
			t.Fatalf("%q: %d tokens, pg_query.Scan gives %d", text, len(got), len(want.GetTokens()))
		}
		for i, w := range want.GetTokens() {
			g := got[i]
			if g.Start != w.Start || g.End != w.End || g.Token != w.Token || g.KeywordKind != w.KeywordKind {
				t.Fatalf("%q: token %d is %+v, pg_query.Scan gives {%d %d %s %s}", text, i, g, w.Start, w.End, w.Token, w.KeywordKind)
			}
		}
		compared++
	}
	if compared < 500 {
		t.Fatalf("only %d texts compared", compared)
	}
	t.Logf("%d texts compared", compared)
}
