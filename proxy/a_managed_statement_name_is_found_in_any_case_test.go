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
	} {
		if got := mayNameManagedStatement(sql); got != want {
			t.Errorf("%q: %v, want %v", sql, got, want)
		}
	}
}
