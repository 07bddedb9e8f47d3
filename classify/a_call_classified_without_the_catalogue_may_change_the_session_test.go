package classify

import "testing"

// unavailableCatalogues is a catalogue source whose catalogue cannot be had (its read failed, or
// outlasted the wait).
type unavailableCatalogues struct{}

func (unavailableCatalogues) Catalogue(string) *Catalogue { return nil }
func (unavailableCatalogues) Held(string) (*Catalogue, bool) {
	return nil, false
}
func (unavailableCatalogues) Lookup(string, *Catalogue, string) (*Catalogue, bool) {
	return nil, false
}
func (unavailableCatalogues) Changed(string, *CatalogueChanges, bool) {}

// TestACallClassifiedWithoutTheCatalogueMayChangeTheSession: when the catalogue cannot be had,
// a call of a user function goes to the primary with an unknown effect, and its effect on the
// session is unknown too (it may run SET ROLE or LISTEN): the proxy asks the node after it. A
// provisional classification, made again once the catalogue is read, does not say so.
func TestACallClassifiedWithoutTheCatalogueMayChangeTheSession(t *testing.T) {
	c := New(Options{Catalogues: unavailableCatalogues{}, CacheSize: -1})
	ctx := &Context{Database: "app", User: "app"}
	if eff := c.ClassifyIn("SELECT app_listen('news')", ctx); eff.Session&SessionUnknown == 0 || eff.Reason != ReasonUnknownEffect {
		t.Errorf("final classification without a catalogue: %v %v; want UNKNOWN_EFFECT with the session unknown", eff.Reason, eff.Session)
	}
	if eff, _ := c.ClassifyWithoutCatalogue("SELECT app_listen('news')", ctx); eff.Session&SessionUnknown != 0 {
		t.Errorf("provisional classification: session %v; want it left to the final one", eff.Session)
	}
	if eff := New(Options{CacheSize: -1}).ClassifyIn("SELECT app_listen('news')", ctx); eff.Session != 0 {
		t.Errorf("a classifier with no catalogue source at all: session %v; want none", eff.Session)
	}
}
