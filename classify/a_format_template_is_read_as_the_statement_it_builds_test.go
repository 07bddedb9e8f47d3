package classify

import "testing"

// TestAFormatTemplateIsReadAsTheStatementItBuilds: format()'s specifiers become a placeholder
// name (%s, %I, with a position, flag or width) or a placeholder literal (%L), %% a percent sign;
// a specifier format() refuses makes no template. (Arguments rendered in: the golden cases.)
func TestAFormatTemplateIsReadAsTheStatementItBuilds(t *testing.T) {
	for _, tc := range []struct {
		template, want string
		ok             bool
	}{
		{"CREATE VIEW %I AS SELECT 1", "CREATE VIEW " + templateValue + " AS SELECT 1", true},
		{"DROP FUNCTION %1$s(%2$s)", "DROP FUNCTION " + templateValue + "(" + templateValue + ")", true},
		{"SELECT %L, '100%%'", "SELECT " + templateLiteral + ", '100%'", true},
		{"SELECT %-10s|%*s|%*2$s", "SELECT " + templateValue + "|" + templateValue + "|" + templateValue, true},
		{"SELECT %d", "", false},
		{"SELECT 1 %", "", false},
	} {
		got, ok := formatted(tc.template, nil)
		if ok != tc.ok || got != tc.want {
			t.Errorf("formatted(%q) = %q, %v; want %q, %v", tc.template, got, ok, tc.want, tc.ok)
		}
	}
}
