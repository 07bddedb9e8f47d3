package classify

import (
	"strings"
	"testing"
)

// TestWritingBuiltinsExist checks that every entry of the reviewed writing table names a real
// PostgreSQL 15 pg_catalog function, so a typo cannot silently turn a writer into an unknown.
func TestWritingBuiltinsExist(t *testing.T) {
	builtins := parseBuiltinNames(pg15BuiltinFunctions)
	if len(builtins) < 2500 {
		t.Fatalf("embedded list has only %d names; regenerate it with go generate ./classify", len(builtins))
	}
	for name := range writingBuiltins() {
		if _, ok := builtins[name]; !ok {
			t.Errorf("writing built-in %q is not in pg15_builtin_functions.txt", name)
		}
	}
	for _, prefix := range writingBuiltinPrefixes() {
		matched := 0
		for name := range builtins {
			if strings.HasPrefix(name, prefix) {
				matched++
			}
		}
		if matched == 0 {
			t.Errorf("writing prefix %q matches no built-in", prefix)
		}
	}
	for name := range writingExtensionFunctions() {
		if _, ok := builtins[name]; ok {
			t.Errorf("extension function %q is a pg_catalog built-in; move it to writingBuiltins", name)
		}
	}
}

// TestEveryWritingBuiltinIsClassifiedAsWrite calls each table entry (unqualified and pg_catalog-qualified).
func TestEveryWritingBuiltinIsClassifiedAsWrite(t *testing.T) {
	classifier := New(Options{CacheSize: -1})
	for name, effect := range writingBuiltins() {
		calls := []string{"SELECT " + name + "()", "SELECT pg_catalog." + name + "(1, 2)"}
		if effect.configSetter {
			// With a constant name: a name it cannot read goes to the primary (golden cases).
			calls = []string{"SELECT " + name + "('work_mem', '8MB', false)", "SELECT pg_catalog." + name + "('work_mem', '8MB', true)"}
		}
		if effect.settingReader {
			// Only a setting that says which kind of server answered is node-local.
			calls = []string{"SELECT " + name + "('work_mem')", "SELECT pg_catalog." + name + "('work_mem', true)"}
		}
		for _, sql := range calls {
			got := classifier.Classify(sql)
			if effect.access == Read {
				if got.Access != Read {
					t.Errorf("%s: got %v, want read", sql, got.Access)
				}
				continue
			}
			want := ReasonWritingFunction
			if effect.unseen != "" {
				want = ReasonUnknownEffect // what it runs is not analysed, and the reason says so
			}
			if got.Access != Write || got.Reason != want || got.Subject != name+"()" {
				t.Errorf("%s: got %v %v %q, want write %v", sql, got.Access, got.Reason, got.Subject, want)
			}
			if effect.unseen != "" && got.Detail != effect.unseen {
				t.Errorf("%s: detail %q, want %q", sql, got.Detail, effect.unseen)
			}
			if got.Session != effect.session {
				t.Errorf("%s: session %v, want %v", sql, got.Session, effect.session)
			}
		}
	}
}

// TestBuiltinReadsAndUnknowns checks the lookup order for names that are not in the writing table.
func TestBuiltinReadsAndUnknowns(t *testing.T) {
	classifier := New(Options{CacheSize: -1})
	tests := []struct {
		sql    string
		access Access
		reason Reason
	}{
		{"SELECT lower('A')", Read, ReasonReadOnly},
		{"SELECT pg_catalog.lower('A')", Read, ReasonReadOnly},
		{"SELECT public.lower('A')", Write, ReasonUnknownEffect},
		{"SELECT not_a_builtin_function()", Write, ReasonUnknownEffect},
		{"SELECT pg_catalog.not_a_builtin_function()", Write, ReasonUnknownEffect},
		{"SELECT binary_upgrade_set_next_pg_enum_oid(1)", Write, ReasonWritingFunction},
		{"SELECT binary_upgrade_not_a_function(1)", Write, ReasonUnknownEffect},
		{"SELECT ext.dblink_exec('x')", Write, ReasonWritingFunction},
	}
	for _, tc := range tests {
		got := classifier.Classify(tc.sql)
		if got.Access != tc.access || got.Reason != tc.reason {
			t.Errorf("%s: got %v %v (%s), want %v %v", tc.sql, got.Access, got.Reason, got.Subject, tc.access, tc.reason)
		}
	}
}
