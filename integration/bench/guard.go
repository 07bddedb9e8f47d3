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

// hotReadScript reads one of 1,000 accounts: values repeat within the verdict cache's lifetime,
// as an application's or an agent's repeated questions do, unlike select-only's uniform random
// key over all accounts.
var hotReadScript = script{
	name:       "hot-read.sql",
	weight:     1,
	statements: 1,
	body: `\set aid random(1, 1000)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
`,
}

// optInWorkloads are workloads run only when -workloads names them.
func optInWorkloads() []workload {
	var list []workload
	for _, mode := range []string{"simple", "prepared"} {
		list = append(list, workload{
			key:     "hot-select-" + mode + "-16",
			title:   "reads of 1,000 hot accounts, -M " + mode + ", 16 clients",
			kind:    mixed,
			mode:    mode,
			clients: 16,
			scripts: []script{hotReadScript},
		})
	}
	return list
}
