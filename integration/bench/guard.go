package main

import "fmt"

// The guard targets measure what a cost guard costs (issue 19): pgowl with a guard that
// matches every statement of the benchmark user, with a cost limit no statement reaches, so
// every statement is explained on its node first and then runs. One target asks the node
// every time; the other keeps verdicts for 5s, keyed by statement text and parameter values.
// Run them with -targets pgowl,pgowl+guard,pgowl+guard+cache.
const (
	targetPgowlGuard      = "pgowl+guard"
	targetPgowlGuardCache = "pgowl+guard+cache"
)

// guardTargets are the targets startPgowlGuard starts.
var guardTargets = []string{targetPgowlGuard, targetPgowlGuardCache}

// guardLimit is the guard's max_cost: above any plan of the benchmark's statements.
const guardLimit = 1000000000

// guardConfig is the guards section of a guard target's configuration.
func guardConfig(name, user string) (yaml, setup string) {
	ttl := "0s"
	if name == targetPgowlGuardCache {
		ttl = "5s"
	}
	yaml = fmt.Sprintf("guards:\n  - {name: bench, match: {users: [%s]}, max_cost: %d, verdict_cache_ttl: %s}\n", user, guardLimit, ttl)
	setup = fmt.Sprintf("; guards: one guard on every statement of user %s, max_cost %d (never reached), verdict_cache_ttl %s", user, guardLimit, ttl)
	return yaml, setup
}
