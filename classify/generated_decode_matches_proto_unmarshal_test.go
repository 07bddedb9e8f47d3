package classify

import (
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/pganalyze/pg_query_go/v5/parser"
	"google.golang.org/protobuf/proto"
)

// parseSQL gives the tree pg_query.Parse gives (proto.Unmarshal of the same bytes), for every
// statement of the testdata corpus, and fails where it fails: the generated decoder misses no
// field, oneof member or repeated element.
func TestGeneratedDecodeMatchesProtoUnmarshal(t *testing.T) {
	statements := append(walkCorpus(t), "SET application_name = '\xd0'", "SELECT 1.5e10, -2147483649, x'1f', b'101', $1::int[]")
	decoded := 0
	for _, sql := range statements {
		decoded += compareDecoders(t, sql)
	}
	if decoded < 500 {
		t.Fatalf("only %d statements of the corpus decoded", decoded)
	}
}

// FuzzGeneratedDecode compares the decoders on any input the parser takes.
func FuzzGeneratedDecode(f *testing.F) {
	for _, seed := range []string{"SELECT f_12(12)", "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$",
		"WITH w AS (DELETE FROM t RETURNING *) SELECT * FROM w FOR UPDATE", "SET x = '\xd0'"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, sql string) { compareDecoders(t, sql) })
}

// compareDecoders decodes the C parser's protobuf of sql both ways and reports whether it did.
func compareDecoders(t *testing.T, sql string) int {
	t.Helper()
	encoded, err := parser.ParseToProtobuf(sql)
	if err != nil {
		return 0
	}
	want := &pg_query.ParseResult{}
	wantErr := proto.Unmarshal(encoded, want)
	got := &pg_query.ParseResult{}
	gotErr := decodeParseResult(encoded, got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Errorf("%q: proto.Unmarshal: %v; generated: %v", sql, wantErr, gotErr)
		return 0
	}
	if wantErr != nil {
		return 0
	}
	if !proto.Equal(want, got) {
		t.Errorf("%q: the generated decoder's tree differs from proto.Unmarshal's", sql)
		return 0
	}
	return 1
}
