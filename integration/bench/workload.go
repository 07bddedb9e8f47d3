package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// scale is the pgbench scale factor: 1,000,000 rows in pgbench_accounts.
const scale = 10

// kind is the transaction script a workload runs.
type kind int

const (
	// selectOnly is pgbench's built-in select-only script (-S): one SELECT per transaction.
	selectOnly kind = iota
	// tpcb is pgbench's built-in TPC-B-like script: BEGIN, three UPDATEs, a SELECT, an INSERT, END.
	tpcb
	// mixed is our own pair of weighted scripts: 80 % single reads, 20 % short write transactions.
	mixed
)

// script is a pgbench script file of a custom workload.
type script struct {
	// name is the file name, also how pgbench names the script in its report.
	name string
	// weight is the script's pgbench weight (-f file@weight).
	weight int
	// statements is the number of SQL statements one transaction of the script sends.
	statements int
	// body is the script text.
	body string
}

// workload is one pgbench configuration, run against every target.
type workload struct {
	// key names the workload on the command line (-workloads) and in progress lines.
	key string
	// title heads the workload's table in the report.
	title string
	kind  kind
	// mode is pgbench's -M query mode: simple, extended or prepared.
	mode    string
	clients int
	// statements is the number of SQL statements per transaction for the built-in scripts.
	statements int
	// scripts are the weighted script files of a custom workload.
	scripts []script
}

// writes reports whether the workload modifies data, so runs must start from a reset state.
func (w workload) writes() bool {
	return w.kind != selectOnly
}

// threads is pgbench's -j: two worker threads, or one for a single client.
func (w workload) threads() int {
	return min(2, w.clients)
}

// args returns pgbench's arguments for a run of duration; scriptDir holds the custom scripts.
func (w workload) args(duration time.Duration, scriptDir string) []string {
	args := []string{
		"-n", // no vacuum by pgbench: resetState does the same directly on the primary
		"-T", strconv.Itoa(int(duration / time.Second)),
		"-c", strconv.Itoa(w.clients),
		"-j", strconv.Itoa(w.threads()),
		"-M", w.mode,
	}
	switch w.kind {
	case selectOnly:
		args = append(args, "-S")
	case mixed:
		for _, s := range w.scripts {
			args = append(args, "-f", filepath.Join(scriptDir, s.name)+"@"+strconv.Itoa(s.weight))
		}
	}
	return args
}

// commandLine renders the pgbench command of a run for the report, with script file names only.
func (w workload) commandLine(duration time.Duration) string {
	return "pgbench " + strings.Join(w.args(duration, ""), " ")
}

// readScript is the read side of the mixed workload: one primary-key lookup.
var readScript = script{
	name:       "read.sql",
	weight:     8,
	statements: 1,
	body: fmt.Sprintf(`\set aid random(1, %d)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
`, 100000*scale),
}

// writeScript is the write side of the mixed workload: a short transaction of an UPDATE and an INSERT.
var writeScript = script{
	name:       "write.sql",
	weight:     2,
	statements: 4,
	body: fmt.Sprintf(`\set aid random(1, %d)
\set tid random(1, %d)
\set bid random(1, %d)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
`, 100000*scale, 10*scale, scale),
}

// allWorkloads returns every workload of a full run, in the order they run and are reported.
func allWorkloads() []workload {
	var list []workload
	for _, mode := range []string{"simple", "extended", "prepared"} {
		for _, clients := range []int{1, 16, 64} {
			list = append(list, workload{
				key:        fmt.Sprintf("select-%s-%d", mode, clients),
				title:      fmt.Sprintf("select-only, -M %s, %s", mode, plural(clients, "client")),
				kind:       selectOnly,
				mode:       mode,
				clients:    clients,
				statements: 1,
			})
		}
	}
	for _, mode := range []string{"simple", "prepared"} {
		list = append(list, workload{
			key:        "tpcb-" + mode + "-16",
			title:      fmt.Sprintf("TPC-B, -M %s, 16 clients", mode),
			kind:       tpcb,
			mode:       mode,
			clients:    16,
			statements: 7,
		})
	}
	list = append(list, workload{
		key:     "mixed-simple-16",
		title:   "mixed 80 % reads / 20 % write transactions, -M simple, 16 clients",
		kind:    mixed,
		mode:    "simple",
		clients: 16,
		scripts: []script{readScript, writeScript},
	})
	return list
}

// quickKeys are the workloads of a -quick smoke run.
var quickKeys = []string{"select-simple-1", "select-simple-16", "select-prepared-16", "tpcb-simple-16", "mixed-simple-16"}

// selectWorkloads returns the workloads named in keys, in the order of allWorkloads.
func selectWorkloads(keys []string) ([]workload, error) {
	wanted := map[string]bool{}
	for _, key := range keys {
		wanted[strings.TrimSpace(key)] = true
	}
	var list []workload
	for _, w := range append(allWorkloads(), optInWorkloads()...) {
		if wanted[w.key] {
			list = append(list, w)
			delete(wanted, w.key)
		}
	}
	if len(wanted) > 0 {
		var known []string
		for _, w := range append(allWorkloads(), optInWorkloads()...) {
			known = append(known, w.key)
		}
		for key := range wanted {
			return nil, fmt.Errorf("unknown workload %q; known: %s", key, strings.Join(known, ", "))
		}
	}
	return list, nil
}

// writeScripts writes the mixed workload's script files into dir; the warm-up uses them too.
func writeScripts(dir string) error {
	for _, s := range []script{readScript, writeScript, hotReadScript} {
		if err := os.WriteFile(filepath.Join(dir, s.name), []byte(s.body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// plural renders a count with its noun, adding "s" unless the count is one.
func plural(count int, noun string) string {
	if count == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", count, noun)
}
