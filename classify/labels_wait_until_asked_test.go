package classify

import "testing"

// ClassifyToRoute leaves a parsed statement's fingerprint and normalised text for Label, which
// gives what ClassifyIn gives, once computed for the verdict's every copy: the proxy routes a
// statement without the two parses they take, and labels it once it is on its way.
func TestLabelsWaitUntilAskedAndMatchClassifyIn(t *testing.T) {
	ctx := &Context{User: "app", SearchPath: []string{"public"}}
	labelled, unlabelled := New(Options{}), New(Options{})
	left := 0
	for _, sql := range walkCorpus(t) {
		want := labelled.ClassifyIn(sql, ctx)
		got := unlabelled.ClassifyToRoute(sql, ctx)
		if got.labels != nil {
			left++
			if got.Fingerprint != "" || got.Normalized != "" {
				t.Errorf("%q: labels both computed and left to compute", sql)
			}
		}
		got.Label()
		if got.Fingerprint != want.Fingerprint || got.Normalized != want.Normalized {
			t.Errorf("%q: labelled later %q %q, by ClassifyIn %q %q", sql, got.Fingerprint, got.Normalized, want.Fingerprint, want.Normalized)
		}
		// The cached verdict shares the labels computed above.
		again := unlabelled.ClassifyToRoute(sql, ctx)
		again.Label()
		if again.Fingerprint != want.Fingerprint || again.Normalized != want.Normalized {
			t.Errorf("%q: cached verdict labelled %q %q, by ClassifyIn %q %q", sql, again.Fingerprint, again.Normalized, want.Fingerprint, want.Normalized)
		}
	}
	if left < 300 {
		t.Fatalf("only %d statements had their labels left to compute", left)
	}
	t.Logf("%d statements labelled when asked", left)
}

// ClassifyIn and Classify give their verdicts labelled, as before ClassifyToRoute.
func TestClassifyInAndClassifyAlwaysLabel(t *testing.T) {
	c := New(Options{})
	const create = "CREATE FUNCTION f(x integer) RETURNS integer LANGUAGE sql AS $$ SELECT x + 41 $$"
	for name, e := range map[string]Effects{
		"ClassifyIn": c.ClassifyIn(create, &Context{User: "app"}),
		"Classify":   New(Options{}).Classify(create),
	} {
		if e.labels != nil || e.Fingerprint == "" || e.Normalized == "" {
			t.Errorf("%s: fingerprint %q, normalised %q, labels pending %v", name, e.Fingerprint, e.Normalized, e.labels != nil)
		}
	}
}
