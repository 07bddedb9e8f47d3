package classify

import (
	"slices"
	"testing"
)

// TestMerge checks each rule of Merge on effects of separately classified statements.
func TestMerge(t *testing.T) {
	c := New(Options{})
	of := func(sql string) Effects { t.Helper(); return c.Classify(sql) }
	cases := []struct {
		name  string
		parts []Effects
		check func(t *testing.T, got Effects)
	}{
		{"no parts read nothing", nil, func(t *testing.T, got Effects) {
			if got.Access != Read || got.Reason != ReasonReadOnly || got.Statements != 0 {
				t.Errorf("got %+v, want a read of no statements", got)
			}
		}},
		{"one part is itself", []Effects{of("SET search_path = a")}, func(t *testing.T, got Effects) {
			if got.SearchPath == nil || got.Statements != 1 || !got.Session.Has(SessionSet) {
				t.Errorf("got %+v, want the part's search path, one statement and SET", got)
			}
		}},
		{"set_config names of every part", []Effects{of("SELECT 1"), of("SELECT set_config('app.tenant', 'x', false)")}, func(t *testing.T, got Effects) {
			if !slices.Contains(got.SetConfigNames, "app.tenant") || !got.Session.Has(SessionSet) || got.Statements != 2 {
				t.Errorf("got names %v, session %v, statements %d; want app.tenant, SET, 2", got.SetConfigNames, got.Session, got.Statements)
			}
		}},
		{"first writer decides", []Effects{of("SELECT 1"), of("SELECT nextval('s')"), of("DELETE FROM t")}, func(t *testing.T, got Effects) {
			if got.Access != Write || got.Reason != ReasonWritingFunction {
				t.Errorf("got %v %v, want write WRITING_FUNCTION", got.Access, got.Reason)
			}
		}},
		{"first transaction control", []Effects{of("SELECT 1"), of("COMMIT"), of("BEGIN")}, func(t *testing.T, got Effects) {
			if got.Tx != TxEnd {
				t.Errorf("got tx %v, want END", got.Tx)
			}
		}},
		{"search path only for one part", []Effects{of("SET search_path = a"), of("SELECT 1")}, func(t *testing.T, got Effects) {
			if got.SearchPath != nil {
				t.Errorf("got search path %+v for two parts, want none", got.SearchPath)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, Merge(tc.parts)) })
	}
}
