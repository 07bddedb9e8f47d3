package classify

import "testing"

// catalogueResolver is a FunctionResolver backed by a map, standing in for the later per-database catalogue.
type catalogueResolver struct {
	functions map[FunctionCall]FunctionEffect
	calls     []FunctionCall
}

func (r *catalogueResolver) ResolveFunction(call FunctionCall) (FunctionEffect, bool) {
	r.calls = append(r.calls, call)
	effect, ok := r.functions[call]
	return effect, ok
}

func TestFunctionResolver(t *testing.T) {
	resolver := &catalogueResolver{functions: map[FunctionCall]FunctionEffect{
		{Schema: "app", Name: "pure", Args: 1}:    {Access: Read},
		{Schema: "", Name: "bump", Args: 0}:       {Access: Write, Reason: ReasonWritingFunction},
		{Schema: "app", Name: "locker", Args: 0}:  {Access: Write, Reason: ReasonWritingFunction, Session: SessionAdvisoryLock},
		{Schema: "app", Name: "mystery", Args: 0}: {Access: Write, Reason: ReasonReadOnly}, // inconsistent answer
	}}
	classifier := New(Options{CacheSize: -1, Functions: resolver})
	tests := []struct {
		sql     string
		access  Access
		reason  Reason
		subject string
		session SessionEffect
	}{
		{"SELECT app.pure(1)", Read, ReasonReadOnly, "SELECT", 0},
		{"SELECT app.pure(1, 2)", Write, ReasonUnknownEffect, "app.pure() (effect unknown: not analysed yet)", 0},
		{"SELECT bump()", Write, ReasonWritingFunction, "bump()", 0},
		{"SELECT app.locker()", Write, ReasonWritingFunction, "app.locker()", SessionAdvisoryLock},
		{"SELECT app.mystery()", Write, ReasonUnknownEffect, "app.mystery() (effect unknown)", 0},
		{"SELECT nextval('s')", Write, ReasonWritingFunction, "nextval()", 0},
	}
	for _, tc := range tests {
		got := classifier.Classify(tc.sql)
		if got.Access != tc.access || got.Reason != tc.reason || got.Subject != tc.subject || got.Session != tc.session {
			t.Errorf("%s: got %v %v %q %v, want %v %v %q %v", tc.sql, got.Access, got.Reason, got.Subject, got.Session,
				tc.access, tc.reason, tc.subject, tc.session)
		}
	}
	for _, call := range resolver.calls {
		if call.Name == "nextval" {
			t.Errorf("resolver was asked about the built-in nextval")
		}
	}
}

// panickingResolver stands in for any bug below Classify.
type panickingResolver struct{}

func (panickingResolver) ResolveFunction(FunctionCall) (FunctionEffect, bool) {
	panic("resolver bug")
}

func TestPanicFailsClosed(t *testing.T) {
	classifier := New(Options{Functions: panickingResolver{}})
	got := classifier.Classify("SELECT app.f()")
	if got.Access != Write || got.Reason != ReasonUnknownEffect || got.Subject != "internal error: resolver bug" {
		t.Errorf("got %+v", got)
	}
	if got.Normalized != UnparseablePlaceholder {
		t.Errorf("Normalized %q must not carry the raw text", got.Normalized)
	}
	if ok := classifier.Classify("SELECT 1"); ok.Access != Read {
		t.Errorf("classifier unusable after a panic: %+v", ok)
	}
}
