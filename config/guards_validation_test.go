package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestGuardsDecode checks that a guard decodes with every field, and that an omitted
// verdict_cache_ttl takes its default.
func TestGuardsDecode(t *testing.T) {
	cfg, err := decodeWith(t, `
guards:
  - name: analytics
    match: {ai_comment: true, users: [reporting], databases: [dwh], application_names: ["metabase*"]}
    max_cost: 50000
    guard_writes: true
    busy: {max_active: 40, max_active_percent: 50, max_in_flight: 8}
  - name: bi
    match: {users: [bi]}
    busy: {max_in_flight: 2}
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Guards) != 2 {
		t.Fatalf("got %d guards", len(cfg.Guards))
	}
	g := cfg.Guards[0]
	if g.Name != "analytics" || !g.Match.AIComment || g.Match.Users[0] != "reporting" || g.Match.Databases[0] != "dwh" ||
		g.Match.ApplicationNames[0] != "metabase*" || g.MaxCost != 50000 || !g.GuardWrites ||
		g.Busy != (GuardBusy{MaxActive: 40, MaxActivePercent: 50, MaxInFlight: 8}) || g.VerdictCacheTTL != DefaultVerdictCacheTTL {
		t.Fatalf("decoded %+v", g)
	}
	if cfg.Guards[1].VerdictCacheTTL != 5*time.Second || cfg.Guards[1].MaxCost != 0 {
		t.Fatalf("second guard %+v", cfg.Guards[1])
	}
	if !g.MatchesSession("x", "y", "metabase 0.48") || !g.MatchesSession("reporting", "y", "") || g.MatchesSession("app", "app", "psql") {
		t.Fatal("MatchesSession does not follow users, databases and application_names patterns")
	}
}

// TestGuardsRefusedWithKey checks that bad guards are refused at start-up with the key named.
func TestGuardsRefusedWithKey(t *testing.T) {
	cases := []struct {
		name, overlay, key, problem string
	}{
		{"matches nothing", `guards: [{name: a, max_cost: 10}]`, "guards[0].match", "matches nothing"},
		{"empty match lists", `guards: [{name: a, max_cost: 10, match: {users: [], databases: []}}]`, "guards[0].match", "matches nothing"},
		{"ai comment without a prefix", "routing: {ai_comment_prefix: \"\"}\nguards: [{name: a, max_cost: 10, match: {ai_comment: true}}]", "guards[0].match.ai_comment", "matches nothing"},
		{"negative cost", `guards: [{name: a, max_cost: -5, match: {users: [app]}}]`, "guards[0].max_cost", "negative"},
		{"unknown key", `guards: [{name: a, max_cost: 10, match: {users: [app]}, max_costs: 3}]`, "guards[0].max_costs", UnknownKey},
		{"unknown match key", `guards: [{name: a, max_cost: 10, match: {user: [app]}}]`, "guards[0].match.user", UnknownKey},
		{"unknown busy key", `guards: [{name: a, match: {users: [app]}, busy: {active: 3}}]`, "guards[0].busy.active", UnknownKey},
		{"no limit", `guards: [{name: a, match: {users: [app]}}]`, "guards[0]", "sets no limit"},
		{"percent over 100", `guards: [{name: a, match: {users: [app]}, busy: {max_active_percent: 101}}]`, "guards[0].busy.max_active_percent", "out of range"},
		{"negative in flight", `guards: [{name: a, match: {users: [app]}, busy: {max_in_flight: -1}}]`, "guards[0].busy.max_in_flight", "less than 0"},
		{"duplicate name", `guards: [{name: a, max_cost: 1, match: {users: [app]}}, {name: a, max_cost: 1, match: {users: [x]}}]`, "guards[1].name", "already"},
		{"bad name", `guards: [{name: "a b", max_cost: 1, match: {users: [app]}}]`, "guards[0].name", "letters"},
		{"bad pattern", `guards: [{name: a, max_cost: 1, match: {application_names: ["[x"]}}]`, "guards[0].match.application_names[0]", "not a pattern"},
		{"negative ttl", `guards: [{name: a, max_cost: 1, match: {users: [app]}, verdict_cache_ttl: -1s}]`, "guards[0].verdict_cache_ttl", "negative"},
		{"cost not a number", `guards: [{name: a, max_cost: lots, match: {users: [app]}}]`, "guards[0].max_cost", "not an integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeWith(t, c.overlay)
			if err == nil {
				t.Fatalf("accepted:\n%s", c.overlay)
			}
			var found bool
			for _, e := range unwrapAll(err) {
				var ce *Error
				if errors.As(e, &ce) && ce.Key == c.key && strings.Contains(ce.Problem, c.problem) {
					found = true
				}
			}
			if !found {
				t.Fatalf("error does not name key %s with %q: %v", c.key, c.problem, err)
			}
		})
	}
}

// unwrapAll flattens errors joined with errors.Join.
func unwrapAll(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var all []error
		for _, e := range joined.Unwrap() {
			all = append(all, unwrapAll(e)...)
		}
		return all
	}
	return []error{err}
}
