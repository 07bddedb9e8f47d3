package classify

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/pgowl/pgowl/classify/internal/treesource"
)

// walk_generated.go, decode_generated.go and decodejson_generated.go are what gentree writes for the pg_query module this
// build links: a pg_query upgrade that adds a node type or a field fails here until
// `go generate ./classify` is run.
func TestGeneratedTreeCodeIsCurrent(t *testing.T) {
	for _, file := range []struct {
		name     string
		generate func() ([]byte, error)
	}{{"walk_generated.go", treesource.Walk}, {"decode_generated.go", treesource.Decode}, {"decodejson_generated.go", treesource.DecodeJSON}} {
		want, err := file.generate()
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(file.name)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run `go generate ./classify`", file.name)
		}
	}
}

// The generated walk (eachChild) reaches every message a walk by protobuf reflection reaches, in
// the same order, for every statement of the classifier's golden tables, catalogue scripts and
// fuzz seeds: the scanner sees exactly what it saw when it walked by reflection.
func TestGeneratedWalkReachesWhatReflectionReaches(t *testing.T) {
	statements := walkCorpus(t)
	if len(statements) < 500 {
		t.Fatalf("only %d statements in the corpus; the testdata layout changed", len(statements))
	}
	var nodes, parsed int
	for _, sql := range statements {
		tree, err := pg_query.Parse(sql)
		if err != nil {
			continue
		}
		parsed++
		var byReflection, generated []any
		reflectionWalk(tree.ProtoReflect(), func(m any) { byReflection = append(byReflection, m) })
		var walk func(any)
		walk = func(m any) {
			generated = append(generated, m)
			eachChild(m, walk)
		}
		walk(tree)
		nodes += len(byReflection)
		if len(generated) != len(byReflection) {
			t.Errorf("%q: the generated walk reaches %d messages, reflection %d", sql, len(generated), len(byReflection))
			continue
		}
		for i := range generated {
			if generated[i] != byReflection[i] {
				t.Errorf("%q: message %d is %T by the generated walk, %T by reflection", sql, i, generated[i], byReflection[i])
				break
			}
		}
	}
	if parsed < 500 {
		t.Fatalf("only %d statements of the corpus parse", parsed)
	}
	t.Logf("%d statements, %d messages reached alike", parsed, nodes)
}

// The generated string walk (stringsIn over eachString and eachChild) finds the strings a walk by
// protobuf reflection finds, each once, over the same corpus: a CREATE VIEW's
// uses (CreatedView) are what they were when they were found by reflection.
func TestGeneratedStringWalkFindsWhatReflectionFinds(t *testing.T) {
	var parsed, found int
	for _, sql := range walkCorpus(t) {
		tree, err := pg_query.Parse(sql)
		if err != nil {
			continue
		}
		parsed++
		want := reflectionStrings(tree.ProtoReflect(), nil)
		got := stringsIn(tree, nil)
		found += len(want)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%q: the generated walk finds %q, reflection %q", sql, got, want)
		}
	}
	if parsed < 500 || found < 1000 {
		t.Fatalf("only %d statements and %d strings; the testdata layout changed", parsed, found)
	}
}

// reflectionStrings is stringsIn as it was before the generated walk: every string field set, by
// protobuf reflection.
func reflectionStrings(message protoreflect.Message, out []string) []string {
	message.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			list := v.List()
			for i := 0; i < list.Len(); i++ {
				if fd.Kind() == protoreflect.MessageKind {
					out = reflectionStrings(list.Get(i).Message(), out)
				} else if fd.Kind() == protoreflect.StringKind {
					out = appendName(out, list.Get(i).String())
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			out = reflectionStrings(v.Message(), out)
		case fd.Kind() == protoreflect.StringKind:
			out = appendName(out, v.String())
		}
		return true
	})
	return out
}

// reflectionWalk is the scanner's walk as it was before the generated one: m, then every
// message below it by protobuf reflection, fields in declaration order.
func reflectionWalk(m protoreflect.Message, visit func(any)) {
	visit(m.Interface())
	fields := m.Descriptor().Fields()
	seenOneofs := map[protoreflect.Name]bool{}
	for i := 0; i < fields.Len(); i++ {
		field := fields.Get(i)
		if oneof := field.ContainingOneof(); oneof != nil {
			if seenOneofs[oneof.Name()] {
				continue
			}
			seenOneofs[oneof.Name()] = true
			field = m.WhichOneof(oneof)
			if field == nil {
				continue
			}
		}
		if field.Kind() != protoreflect.MessageKind && field.Kind() != protoreflect.GroupKind {
			continue
		}
		switch {
		case field.IsList():
			list := m.Get(field).List()
			for j := 0; j < list.Len(); j++ {
				reflectionWalk(list.Get(j).Message(), visit)
			}
		case m.Has(field):
			reflectionWalk(m.Get(field).Message(), visit)
		}
	}
}

// walkCorpus returns every "sql" of the JSON tables under testdata, every statement of its SQL
// scripts, and the fuzz seeds' strings.
func walkCorpus(t *testing.T) []string {
	t.Helper()
	var out []string
	var collect func(v any)
	collect = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for key, value := range v {
				if s, ok := value.(string); ok && (key == "sql" || key == "setup") {
					out = append(out, s)
				} else {
					collect(value)
				}
			}
		case []any:
			for _, value := range v {
				if s, ok := value.(string); ok {
					out = append(out, s) // a list of setup statements
				} else {
					collect(value)
				}
			}
		}
	}
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(path, ".json"):
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				return err
			}
			collect(v)
		case strings.HasSuffix(path, ".sql"):
			parts, err := pg_query.SplitWithParser(string(data), true)
			if err != nil {
				return err
			}
			out = append(out, parts...)
		case strings.Contains(path, "fuzz"):
			for _, line := range strings.Split(string(data), "\n") {
				if quoted, ok := strings.CutPrefix(line, "string("); ok {
					if s, err := strconv.Unquote(strings.TrimSuffix(quoted, ")")); err == nil {
						out = append(out, s)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
