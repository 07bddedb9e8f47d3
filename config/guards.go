package config

import (
	"fmt"
	"path"
	"time"
)

// Guard is a traffic class: the statements it matches (AI and reporting traffic) are refused
// when their plan is too expensive or their node too busy. Statements no guard matches are
// business traffic and are never refused for cost or load.
type Guard struct {
	// Name identifies the guard in refusals, NOTICEs and logs; [a-zA-Z0-9_-]+ and unique.
	Name string `yaml:"name" mapstructure:"name"`
	// Match says which statements belong to the class: any matcher that matches is enough.
	Match GuardMatch `yaml:"match" mapstructure:"match"`
	// MaxCost is the largest estimated total plan cost (EXPLAIN's units) a guarded statement may
	// have; 0 checks no cost.
	MaxCost int64 `yaml:"max_cost" mapstructure:"max_cost"`
	// GuardWrites also guards the class's writes; by default only its reads are guarded.
	GuardWrites bool `yaml:"guard_writes" mapstructure:"guard_writes"`
	// Busy keeps the class off nodes that are busy.
	Busy GuardBusy `yaml:"busy" mapstructure:"busy"`
	// VerdictCacheTTL is how long a cost verdict is reused for the same statement text and
	// parameter values on the same node; 0 asks the node every time.
	VerdictCacheTTL time.Duration `yaml:"verdict_cache_ttl" mapstructure:"verdict_cache_ttl"`
}

// GuardMatch lists what makes a statement belong to a guard's class.
type GuardMatch struct {
	// AIComment matches statements that start with routing.ai_comment_prefix.
	AIComment bool `yaml:"ai_comment" mapstructure:"ai_comment"`
	// Users matches sessions of these users.
	Users []string `yaml:"users" mapstructure:"users"`
	// Databases matches sessions on these databases.
	Databases []string `yaml:"databases" mapstructure:"databases"`
	// ApplicationNames matches sessions whose application_name matches one of these patterns
	// (path.Match syntax: * and ? wildcards, [a-z] classes) when the statement comes: the startup
	// one, or what the session set since (SET, set_config, SET LOCAL until its block ends).
	ApplicationNames []string `yaml:"application_names" mapstructure:"application_names"`
}

// GuardBusy are a guard's load limits for one node; 0 turns a limit off.
type GuardBusy struct {
	// MaxActive: no statement of the class is sent to a node with this many active client
	// backends (as the monitor last read them).
	MaxActive int `yaml:"max_active" mapstructure:"max_active"`
	// MaxActivePercent is MaxActive as a share of the node's max_connections, 1..100.
	MaxActivePercent int `yaml:"max_active_percent" mapstructure:"max_active_percent"`
	// MaxInFlight: no statement of the class is sent to a node that runs this many of them
	// through this pgowl already.
	MaxInFlight int `yaml:"max_in_flight" mapstructure:"max_in_flight"`
}

// DefaultVerdictCacheTTL is a guard's verdict_cache_ttl when it is not given.
const DefaultVerdictCacheTTL = 5 * time.Second

// setDefaults fills the fields a list item of guards may omit.
func (g *Guard) setDefaults() { g.VerdictCacheTTL = DefaultVerdictCacheTTL }

// guards checks the guard list: unique well-formed names, at least one matcher that can match,
// at least one limit, no negative limits, valid application_name patterns.
func (v *validator) guards(guards []Guard, aiPrefix string) {
	firstIndex := map[string]int{}
	for i, g := range guards {
		prefix := fmt.Sprintf("guards[%d]", i)
		switch {
		case !isNodeName(g.Name):
			v.fail(prefix+".name", "%q must be non-empty and contain only letters, digits, _ and -", g.Name)
		default:
			if first, taken := firstIndex[g.Name]; taken {
				v.fail(prefix+".name", "%q is already the name of guards[%d]", g.Name, first)
			} else {
				firstIndex[g.Name] = i
			}
		}
		m := g.Match
		if m.AIComment && aiPrefix == "" {
			v.fail(prefix+".match.ai_comment", "is true but routing.ai_comment_prefix is empty: it matches nothing")
		}
		if !m.AIComment && len(m.Users) == 0 && len(m.Databases) == 0 && len(m.ApplicationNames) == 0 {
			v.fail(prefix+".match", "matches nothing: set ai_comment, users, databases or application_names")
		}
		for j, u := range m.Users {
			v.notEmpty(fmt.Sprintf("%s.match.users[%d]", prefix, j), u)
		}
		for j, d := range m.Databases {
			v.notEmpty(fmt.Sprintf("%s.match.databases[%d]", prefix, j), d)
		}
		for j, p := range m.ApplicationNames {
			key := fmt.Sprintf("%s.match.application_names[%d]", prefix, j)
			if _, err := path.Match(p, ""); err != nil || p == "" {
				v.fail(key, "%q is not a pattern (use * and ? wildcards)", p)
			}
		}
		if g.MaxCost < 0 {
			v.fail(prefix+".max_cost", "%d is negative; 0 checks no cost", g.MaxCost)
		}
		b := g.Busy
		v.atLeast(prefix+".busy.max_active", b.MaxActive, 0)
		v.atLeast(prefix+".busy.max_in_flight", b.MaxInFlight, 0)
		v.intRange(prefix+".busy.max_active_percent", b.MaxActivePercent, 0, 100)
		v.notNegative(prefix+".verdict_cache_ttl", g.VerdictCacheTTL)
		if g.MaxCost == 0 && b.MaxActive <= 0 && b.MaxActivePercent <= 0 && b.MaxInFlight <= 0 {
			v.fail(prefix, "sets no limit: set max_cost or a busy limit")
		}
	}
}

// MatchesSession reports whether the guard matches every statement of a session of user on
// database with application name app (the AI comment is a matter of each statement).
func (g *Guard) MatchesSession(user, database, app string) bool {
	for _, u := range g.Match.Users {
		if u == user {
			return true
		}
	}
	for _, d := range g.Match.Databases {
		if d == database {
			return true
		}
	}
	for _, p := range g.Match.ApplicationNames {
		if ok, _ := path.Match(p, app); ok {
			return true
		}
	}
	return false
}
