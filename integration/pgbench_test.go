package integration

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

var (
	pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)/(\d+)$`)
	pgbenchFailed    = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
)

// TestPgbench initialises pgbench tables through pgowl, then runs the
// select-only and TPC-B scripts in every query mode. Every transaction must
// succeed, and the select-only runs' SELECTs must have run on the standbys.
func TestPgbench(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	pgbench := pgBinary(t, "pgbench")
	const clients, threads, perClient = 4, 2, 200
	const total = clients * perClient

	res := runCmd(t, 2*time.Minute, o.clientEnv(), pgbench, "-i", "-s", "1", "--quiet")
	if res.exitCode != 0 {
		t.Fatalf("pgbench -i exited with %d\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.stdout, res.stderr)
	}
	if got := primaryInt(t, c, "SELECT count(*) FROM pgbench_accounts"); got != 100000 {
		t.Fatalf("after pgbench -i the primary has %d accounts, want 100000", got)
	}
	catchUp(t, c)

	for _, script := range []struct {
		name string
		args []string
	}{
		{"select_only", []string{"-S"}},
		{"tpcb", nil},
	} {
		for _, mode := range []string{"simple", "extended", "prepared"} {
			t.Run(script.name+"_"+mode, func(t *testing.T) {
				if script.name == "select_only" {
					catchUp(t, c)
					resetStats(t, c)
				}
				args := append([]string{"-M", mode, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads), "-t", strconv.Itoa(perClient)}, script.args...)
				res := runCmd(t, 2*time.Minute, o.clientEnv(), pgbench, args...)
				if res.exitCode != 0 {
					t.Fatalf("pgbench %v exited with %d\nstdout:\n%s\nstderr:\n%s", args, res.exitCode, res.stdout, res.stderr)
				}
				m := pgbenchProcessed.FindStringSubmatch(res.stdout)
				if m == nil || m[1] != strconv.Itoa(total) || m[2] != strconv.Itoa(total) {
					t.Errorf("pgbench %v did not process %d/%d transactions\nstdout:\n%s\nstderr:\n%s", args, total, total, res.stdout, res.stderr)
				}
				if f := pgbenchFailed.FindStringSubmatch(res.stdout); f != nil && f[1] != "0" {
					t.Errorf("pgbench %v reports %s failed transactions\nstdout:\n%s", args, f[1], res.stdout)
				}
				if script.name == "select_only" {
					ev := evidenceLike(t, c, "SELECT abalance FROM pgbench_accounts WHERE aid = %")
					requireOnStandbys(t, c, "pgbench -S SELECT", ev, total)
					t.Logf("select-only SELECTs per node: %v", ev)
				}
			})
		}
	}
	// pgbench empties pgbench_history before each run; the last TPC-B run
	// inserted one history row per transaction, on the primary.
	if got := primaryInt(t, c, "SELECT count(*) FROM pgbench_history"); got != total {
		t.Errorf("pgbench_history holds %d rows after the last TPC-B run, want %d", got, total)
	}
}
