package main

import (
	"errors"
	"math"
	"testing"
	"time"
)

// Reports as pgbench 15 prints them.
const (
	selectOnlyReport = `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: select only>
scaling factor: 10
query mode: prepared
number of clients: 16
number of threads: 2
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 17323
number of failed transactions: 0 (0.000%)
latency average = 1.519 ms
initial connection time = 375.640 ms
tps = 10533.913693 (without initial connection time)
`
	mixedReport = `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: multiple scripts
scaling factor: 1
query mode: simple
number of clients: 16
number of threads: 2
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 6901
number of failed transactions: 0 (0.000%)
latency average = 4.310 ms
initial connection time = 197.045 ms
tps = 3712.708157 (without initial connection time)
SQL script 1: /tmp/pgowl-bench-614672923/scripts/read.sql
 - weight: 8 (targets 80.0% of total)
 - 5481 transactions (79.4% of total, tps = 2948.754298)
 - number of failed transactions: 0 (0.000%)
 - latency average = 2.453 ms
 - latency stddev = 2.095 ms
SQL script 2: /tmp/pgowl-bench-614672923/scripts/write.sql
 - weight: 2 (targets 20.0% of total)
 - 1420 transactions (20.6% of total, tps = 763.953859)
 - number of failed transactions: 0 (0.000%)
 - latency average = 9.492 ms
 - latency stddev = 5.959 ms
`
	abortedStderr = `pgbench: error: ERROR:  prepared statement "P_0" already exists
pgbench: error: client 13 script 0 aborted in command 1 query 0: ERROR:  prepared statement "P_0" does not exist
pgbench: error: Run was aborted; the above results are incomplete.
`
	noTransactionsReport = `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: multiple scripts
duration: 3 s
number of transactions actually processed: 0
number of failed transactions: 0 (NaN%)
`
)

func TestParsePgbench(t *testing.T) {
	selectOnly := workload{kind: selectOnly, statements: 1}
	mixedWorkload := workload{kind: mixed, scripts: []script{readScript, writeScript}}
	cases := []struct {
		name           string
		w              workload
		stdout, stderr string
		exitErr        error
		wantFailed     bool
		wantErr        string
		wantTPS        float64
		wantLatency    float64
		wantStatements int64
	}{
		{name: "select-only", w: selectOnly, stdout: selectOnlyReport,
			wantTPS: 10533.913693, wantLatency: 1.519, wantStatements: 17323},
		{name: "mixed counts statements per script", w: mixedWorkload, stdout: mixedReport,
			wantTPS: 3712.708157, wantLatency: 4.310, wantStatements: 5481*1 + 1420*4},
		{name: "aborted clients fail with the first error line", w: selectOnly, stdout: selectOnlyReport,
			stderr: abortedStderr, exitErr: errors.New("exit status 2"), wantFailed: true,
			wantErr: `pgbench: error: ERROR:  prepared statement "P_0" already exists`,
			wantTPS: 10533.913693, wantLatency: 1.519, wantStatements: 17323},
		{name: "no transaction is a failure", w: mixedWorkload, stdout: noTransactionsReport, wantFailed: true,
			wantErr: "no transaction completed: connecting the clients took the whole -T duration"},
		{name: "no report at all", w: mixedWorkload, stdout: "pgbench (15.18)\n", wantFailed: true,
			wantErr: "pgbench printed no result"},
		{name: "non-zero exit without output", w: selectOnly, exitErr: errors.New("exit status 1"), wantFailed: true,
			wantErr: "pgbench: exit status 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := parsePgbench(tc.w, tc.stdout, tc.stderr, tc.exitErr)
			if r.failed != tc.wantFailed || r.errLine != tc.wantErr {
				t.Errorf("failed=%v errLine=%q, want failed=%v errLine=%q", r.failed, r.errLine, tc.wantFailed, tc.wantErr)
			}
			if math.Abs(r.tps-tc.wantTPS) > 1e-6 || math.Abs(r.latencyMS-tc.wantLatency) > 1e-9 {
				t.Errorf("tps=%v latency=%v, want %v and %v", r.tps, r.latencyMS, tc.wantTPS, tc.wantLatency)
			}
			if r.statements != tc.wantStatements {
				t.Errorf("statements=%d, want %d", r.statements, tc.wantStatements)
			}
		})
	}
}

func TestSummarizeMediansOverSuccessfulRuns(t *testing.T) {
	runs := []runResult{
		{tps: 100, latencyMS: 1, statements: 1000, cpu: time.Second, hasCPU: true, otherCores: 0.1},
		{failed: true, errLine: "boom", otherCores: 0.5},
		{tps: 300, latencyMS: 3, statements: 1000, cpu: 3 * time.Second, hasCPU: true, otherCores: 0.2},
	}
	s := summarize(runs)
	if s.runs != 3 || s.ok != 2 || s.tps != 200 || s.latencyMS != 2 || s.firstErr != "boom" {
		t.Errorf("summarize = %+v", s)
	}
	if s.cpuPer10k != 20 {
		t.Errorf("cpuPer10k = %v, want 20 (2 s per 1000 statements)", s.cpuPer10k)
	}
	if s.otherCores != 0.2 {
		t.Errorf("otherCores = %v, want the median of all runs, 0.2", s.otherCores)
	}
	if fmtRounds(s.perRound) != "100, fail, 300" {
		t.Errorf("perRound = %q", fmtRounds(s.perRound))
	}
}

func TestSelectWorkloads(t *testing.T) {
	list, err := selectWorkloads(quickKeys)
	if err != nil || len(list) != len(quickKeys) {
		t.Fatalf("quick workloads: %d, %v", len(list), err)
	}
	if _, err := selectWorkloads([]string{"select-simple-2"}); err == nil {
		t.Error("an unknown workload key was accepted")
	}
	if got := len(allWorkloads()); got != 12 {
		t.Errorf("allWorkloads has %d entries, want 12", got)
	}
}

func TestNoticeFilterCountsAndDropsNotices(t *testing.T) {
	f := &noticeFilter{}
	input := "NOTICE:  pgowl: pg2 (standby) ran this statement\nDETAIL:  node=pg2 role=standby reason=READ_ONLY lag_ms=0\n" +
		"pgbench: error: client 0 aborted\nDETAIL:  pg1: primary up\nNOTICE:  again\nDETAIL:  node=pg3\nlast line without newline"
	// Write in awkward pieces, as a pipe may deliver them.
	for i := 0; i < len(input); i += 7 {
		if _, err := f.Write([]byte(input[i:min(i+7, len(input))])); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := f.String(), "pgbench: error: client 0 aborted\nDETAIL:  pg1: primary up\nlast line without newline\n"; got != want {
		t.Errorf("kept %q, want %q", got, want)
	}
	if f.notices != 2 {
		t.Errorf("notices = %d, want 2", f.notices)
	}
}
