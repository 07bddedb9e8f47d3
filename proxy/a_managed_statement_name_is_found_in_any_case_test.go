package proxy

import "testing"

// TestAManagedStatementNameIsFoundInAnyCase: the cheap test before a Parse's text is classified
// finds the managed prefix in any case and anywhere, and nothing else.
func TestAManagedStatementNameIsFoundInAnyCase(t *testing.T) {
	for sql, want := range map[string]bool{
		"EXECUTE pgowl_abc":            true,
		"execute PGOWL_abc":            true,
		"SELECT 1; DEALLOCATE PgOwL_x": true,
		"SELECT 'pgowl_'":              true, // a false alarm costs a classification, no refusal
		"SELECT pgowl":                 false,
		"SELECT pp, pg, pgow":          false,
		"":                             false,
		"pgowl_":                       true,
		"xpgowl":                       false,
		`EXECUTE U&"\0070gowl_x"`:      true, // Unicode escapes hold no "pgowl_"
		`execute u&"\0070gowl_x"`:      true,
	} {
		if got := mayNameManagedStatement(sql); got != want {
			t.Errorf("%q: %v, want %v", sql, got, want)
		}
	}
}
