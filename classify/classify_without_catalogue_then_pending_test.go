package classify

import "testing"

// ClassifyWithoutCatalogue gives a statement whose verdict cannot depend on a catalogue its final
// effects; for one whose verdict may, it gives provisional effects (with the text's own facts, no
// fingerprint) and a pending statement that ClassifyPending turns into the
// effects ClassifyIn gives, fingerprint and normalised text included, from the kept parse.
func TestClassifyWithoutCatalogueThenPending(t *testing.T) {
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"public"}}
	source := &movingSource{cat: testCatalogue()}
	c := New(Options{Catalogues: source, CacheSize: -1})
	for _, tc := range []struct {
		sql       string
		dependent bool
	}{
		{"SELECT 1", false},
		{"CREATE TABLE later_t (a int)", false},
		{"SET search_path = public", false},
		{"SELEC nothing", false},
		{"SELECT f_report()", true},
		{"SELECT * FROM v_plain", true},
		{"SELECT pure_sql(1), pg_advisory_lock(1)", true},
	} {
		want := c.ClassifyIn(tc.sql, ctx)
		got, pending := c.ClassifyWithoutCatalogue(tc.sql, ctx)
		if (pending != nil) != tc.dependent {
			t.Errorf("%s: pending %v, want dependent %v", tc.sql, pending != nil, tc.dependent)
			continue
		}
		if pending == nil {
			if got.Access != want.Access || got.Reason != want.Reason || got.Fingerprint != want.Fingerprint || got.Statements != want.Statements {
				t.Errorf("%s: without a catalogue %v/%v %q, ClassifyIn %v/%v %q", tc.sql, got.Access, got.Reason, got.Fingerprint, want.Access, want.Reason, want.Fingerprint)
			}
			continue
		}
		if got.Fingerprint != "" || got.Statements != want.Statements || got.Session != want.Session {
			t.Errorf("%s: provisional effects %q, %d statements, session %v; want no fingerprint, %d statements, session %v",
				tc.sql, got.Fingerprint, got.Statements, got.Session, want.Statements, want.Session)
		}
		final := c.ClassifyPending(pending, ctx)
		if final.Access != want.Access || final.Reason != want.Reason || final.Subject != want.Subject ||
			final.Fingerprint != want.Fingerprint || final.Normalized != want.Normalized || final.Session != want.Session {
			t.Errorf("%s: pending classified %v/%v %q %q, ClassifyIn %v/%v %q %q", tc.sql, final.Access, final.Reason, final.Subject, final.Fingerprint,
				want.Access, want.Reason, want.Subject, want.Fingerprint)
		}
	}
}
