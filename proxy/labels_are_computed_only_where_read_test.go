package proxy

import (
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/admin"
	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

// A unit's labels (fingerprint and normalised text) cost two more runs of the parser. They are
// computed when the routing log's info line or the observer will read them, and otherwise only
// when SHOW pgowl.explain asks.
func TestLabelsAreComputedOnlyWhereRead(t *testing.T) {
	quiet := zerolog.New(io.Discard).Level(zerolog.WarnLevel)
	loud := zerolog.New(io.Discard).Level(zerolog.InfoLevel)
	for _, tc := range []struct {
		name     string
		log      zerolog.Logger
		observer UnitObserver
		want     bool
	}{
		{"info log, no observer", loud, nil, true},
		{"warn log, no observer", quiet, nil, false},
		{"warn log, an observer", quiet, silentObserver{}, true},
	} {
		sess := &session{srv: &Server{opts: Options{Observer: tc.observer}}, log: tc.log}
		if got := sess.labelsRead(); got != tc.want {
			t.Errorf("%s: labelsRead = %v, want %v", tc.name, got, tc.want)
		}
	}

	c := classify.New(classify.Options{})
	effects := c.ClassifyToRoute("SELECT 42 FROM items WHERE name = 'secret'", &classify.Context{Database: "app", User: "app"})
	if effects.Normalized != "" || effects.Fingerprint != "" {
		t.Fatalf("ClassifyToRoute computed the labels (%q, %q): this test no longer tests what it says", effects.Normalized, effects.Fingerprint)
	}
	last := lastUnit{effects: effects, decision: route.Decision{Node: "pg1", Role: route.RolePrimary}, outcome: "ok", valid: true}
	text := last.explain()
	if !strings.Contains(text, `statement="SELECT $1 FROM items WHERE name = $2"`) || strings.Contains(text, "secret") {
		t.Errorf("SHOW pgowl.explain without labels computed before: %s", text)
	}
}

// silentObserver is an observer that records nothing.
type silentObserver struct{}

func (silentObserver) Routed(admin.Unit) {}
