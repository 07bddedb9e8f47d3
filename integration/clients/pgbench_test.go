package clients

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/internal/cluster"
)

var (
	pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)/(\d+)$`)
	pgbenchFailed    = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
	// psqlNoticeLine matches a NOTICE psql prints on stderr, with its DETAIL line if any.
	psqlNoticeLine = regexp.MustCompile(`(?m)^(NOTICE|WARNING):  ([^\n]*)(?:\nDETAIL:  ([^\n]*))?`)
)

// TestPgbench64 initialises pgbench's tables through pgowl and runs the
// select-only and TPC-B scripts in every query mode with 64 clients on two
// threads. Every transaction must succeed; the nodes' statistics say where
// the statements ran: select-only on the standbys, TPC-B on the primary.
func TestPgbench64(t *testing.T) {
	c := sharedClusterFor(t)
	pgbench := pgBinary(t, "pgbench")
	o := startOwl(t, c, nil)
	env := o.libpqEnv()
	const clients, threads, perClient = 64, 2, 50
	const total = clients * perClient

	res := runCmd(t, 2*time.Minute, "", env, pgbench, "-i", "-s", "1", "--quiet")
	if res.exitCode != 0 {
		t.Fatalf("pgbench -i exited with %d\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.stdout, owltest.TailString(res.stderr, 8<<10))
	}
	if got := primaryInt(t, c, "SELECT count(*) FROM pgbench_accounts"); got != 100000 {
		t.Fatalf("after pgbench -i the primary has %d accounts, want 100000", got)
	}

	for _, script := range []struct{ name, flag string }{{"select_only", "-S"}, {"tpcb", ""}} {
		for _, mode := range []string{"simple", "extended", "prepared"} {
			t.Run(script.name+"_"+mode, func(t *testing.T) {
				catchUp(t, c)
				resetStats(t, c)
				args := []string{"-M", mode, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads), "-t", strconv.Itoa(perClient), "--no-vacuum"}
				if script.flag != "" {
					args = append(args, script.flag)
				}
				began := time.Now()
				res := runCmd(t, 2*time.Minute, "", env, pgbench, args...)
				t.Logf("pgbench %s: %s", strings.Join(args, " "), time.Since(began).Round(time.Millisecond))
				if res.exitCode != 0 {
					t.Fatalf("pgbench %v exited with %d\nstdout:\n%s\nstderr:\n%s", args, res.exitCode, res.stdout, owltest.TailString(res.stderr, 8<<10))
				}
				m := pgbenchProcessed.FindStringSubmatch(res.stdout)
				if m == nil || m[1] != strconv.Itoa(total) || m[2] != strconv.Itoa(total) {
					t.Errorf("pgbench %v did not process %d/%d transactions\nstdout:\n%s\nstderr:\n%s", args, total, total, res.stdout, owltest.TailString(res.stderr, 8<<10))
				}
				if f := pgbenchFailed.FindStringSubmatch(res.stdout); f != nil && f[1] != "0" {
					t.Errorf("pgbench %v reports %s failed transactions\nstdout:\n%s", args, f[1], res.stdout)
				}
				if strings.Contains(res.stderr, "aborted") || strings.Contains(res.stderr, "ERROR") {
					t.Errorf("pgbench %v reported errors:\n%s", args, owltest.TailString(res.stderr, 8<<10))
				}
				selects := evidenceLike(t, c, "SELECT abalance FROM pgbench_accounts WHERE aid = %")
				if script.name == "select_only" {
					wantSpread(t, c, "select-only SELECTs", selects, 0, total)
					return
				}
				// TPC-B: every statement runs in a transaction begun on the primary.
				wantSpread(t, c, "TPC-B SELECTs", selects, total, 0)
				wantSpread(t, c, "TPC-B UPDATEs of accounts", evidenceLike(t, c, "UPDATE pgbench_accounts SET abalance%"), total, 0)
				wantSpread(t, c, "TPC-B INSERTs into history", evidenceLike(t, c, "INSERT INTO pgbench_history%"), total, 0)
			})
		}
	}
	// --no-vacuum keeps pgbench from emptying pgbench_history between runs:
	// each of the three TPC-B runs added one row per transaction.
	if got := primaryInt(t, c, "SELECT count(*) FROM pgbench_history"); got != 3*total {
		t.Errorf("pgbench_history holds %d rows after three TPC-B runs, want %d", got, 3*total)
	}
}

// wantSpread requires that the primary ran a statement onPrimary times and the standbys onStandbys times in all.
func wantSpread(t *testing.T, c *cluster.Cluster, what string, ev map[string]int64, onPrimary, onStandbys int64) {
	t.Helper()
	var standbys int64
	for _, n := range c.Nodes[1:] {
		standbys += ev[n.Name]
	}
	if ev[c.Nodes[0].Name] != onPrimary || standbys != onStandbys {
		t.Errorf("%s: the primary ran %d and the standbys %d, want %d and %d (per node %v)", what, ev[c.Nodes[0].Name], standbys, onPrimary, onStandbys, ev)
	} else {
		t.Logf("%s per node: %v", what, ev)
	}
}

// psqlNotices returns the NOTICEs psql printed on stderr.
func psqlNotices(stderr string) []notice {
	var out []notice
	for _, m := range psqlNoticeLine.FindAllStringSubmatch(stderr, -1) {
		out = append(out, notice{Conn: "psql", Severity: m[1], Message: m[2], Detail: m[3]})
	}
	return out
}

// TestPsqlMatrix runs the client matrix's features that psql has: login,
// simple queries, transactions, \copy both ways, an error in the middle of a
// multi-statement string, LISTEN/NOTIFY, cancel on SIGINT and a large result.
// psql 15 has neither the extended protocol (\bind came in 16) nor
// protocol-level prepared statements; psycopg2's matrix covers SQL PREPARE.
func TestPsqlMatrix(t *testing.T) {
	c := sharedClusterFor(t)
	psql := pgBinary(t, "psql")
	o := startOwl(t, c, nil)
	tb := createTables(t, c, "psql")
	base := []string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "--no-align", "--tuples-only"}
	run := func(t *testing.T, ep endpoint, args ...string) cmdResult {
		t.Helper()
		return runCmd(t, 2*time.Minute, "", ep.libpqEnv(), psql, append(append([]string{}, base...), args...)...)
	}
	mustRun := func(t *testing.T, args ...string) cmdResult {
		t.Helper()
		res := run(t, o.endpoint, args...)
		if res.exitCode != 0 {
			t.Fatalf("psql %v exited with %d\nstdout:\n%s\nstderr:\n%s", args, res.exitCode, res.stdout, res.stderr)
		}
		return res
	}

	t.Run("auth_scram", func(t *testing.T) {
		res := mustRun(t, "-c", "SELECT current_user")
		if got := strings.TrimSpace(res.stdout); got != appUser {
			t.Errorf("current_user = %q, want %q", got, appUser)
		}
		bad := runCmd(t, time.Minute, "", append(o.libpqEnv(), "PGPASSWORD=wrong-"+appPassword), psql, append(base, "-c", "SELECT 1")...)
		if bad.exitCode != 2 || !strings.Contains(bad.stderr, "password authentication failed") {
			t.Errorf("a wrong password: psql exited with %d, stderr %q; want 2 and a failed authentication", bad.exitCode, bad.stderr)
		}
	})

	t.Run("simple_read_and_write", func(t *testing.T) {
		readTag, writeTag := marker("psql-read"), marker("psql-write")
		resetStats(t, c)
		res := mustRun(t, "-c", fmt.Sprintf("SELECT /* %s */ count(*) FROM %s", readTag, tb.items))
		if n, _ := strconv.Atoi(strings.TrimSpace(res.stdout)); n < seedItems {
			t.Errorf("count = %q, want at least %d", res.stdout, seedItems)
		}
		rs := wantRoutes(t, "read", psqlNotices(res.stderr), "psql", 1, "standby", "READ_ONLY")
		onOneStandby(t, c, "read", readTag, rs)
		res = mustRun(t, "-c", fmt.Sprintf("INSERT /* %s */ INTO %s (v) VALUES ('psql write')", writeTag, tb.items))
		wantRoutes(t, "write", psqlNotices(res.stderr), "psql", 1, "primary", "WRITE")
		onPrimary(t, c, "write", writeTag, 1)
	})

	t.Run("transaction", func(t *testing.T) {
		tag, value := marker("psql-tx-read"), marker("psql-tx")
		resetStats(t, c)
		res := mustRun(t, "-c", "BEGIN",
			"-c", fmt.Sprintf("INSERT INTO %s (v) VALUES ('%s')", tb.items, value),
			"-c", fmt.Sprintf("SELECT /* %s */ v FROM %s WHERE v = '%s'", tag, tb.items, value),
			"-c", "COMMIT")
		if got := strings.TrimSpace(res.stdout); got != value {
			t.Errorf("the transaction read %q back, want %q", got, value)
		}
		checkTxRoutes(t, "psql transaction", psqlNotices(res.stderr), "primary", "WRITE")
		onPrimary(t, c, "read inside the transaction", tag, 1)
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v = $1", tb.items), value); got != 1 {
			t.Errorf("after COMMIT the primary holds %d rows %q, want 1", got, value)
		}
	})

	const copyRows = 3000
	t.Run("copy_in_and_out", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "rows.tsv")
		if err := os.WriteFile(file, []byte(copyInput(copyRows)), 0o644); err != nil {
			t.Fatal(err)
		}
		res := mustRun(t, "-c", fmt.Sprintf(`\copy %s (id, v) FROM '%s'`, tb.copy, file))
		wantRoutes(t, `\copy FROM`, psqlNotices(res.stderr), "psql", 1, "primary", "WRITE")
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v = 'copy row ' || id", tb.copy)); got != copyRows {
			t.Errorf(`after \copy FROM the primary holds %d matching rows, want %d`, got, copyRows)
		}
		catchUp(t, c)
		tag := marker("psql-copy-out")
		resetStats(t, c)
		res = mustRun(t, "-c", fmt.Sprintf(`\copy (SELECT /* %s */ id, v FROM %s ORDER BY id) TO STDOUT`, tag, tb.copy))
		if got := len(lines(res.stdout)); got != copyRows {
			t.Errorf(`\copy TO STDOUT printed %d lines, want %d`, got, copyRows)
		}
		rs := wantRoutes(t, `\copy TO`, psqlNotices(res.stderr), "psql", 1, "standby", "READ_ONLY")
		// The COPY and the query inside it are both recorded.
		ran := onStandbys(t, c, `\copy TO`, tag, 2)
		if len(ran) == 1 && len(rs) == 1 && rs[0].Node != ran[0] {
			t.Errorf(`\copy TO: the NOTICE names %s, pg_stat_statements says %s ran it`, rs[0].Node, ran[0])
		}
	})

	t.Run("batch_error", func(t *testing.T) {
		first, third := marker("psql-batch-a"), marker("psql-batch-c")
		q := batchSQL(tb, first, third)
		res := run(t, o.endpoint, "-c", q[0]+"; "+q[1]+"; "+q[2])
		if res.exitCode != 1 || !strings.Contains(res.stderr, "division by zero") {
			t.Errorf("psql exited with %d, stderr %q; want 1 and division by zero", res.exitCode, res.stderr)
		}
		if got := primaryInt(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE v IN ($1, $2)", tb.items), first, third); got != 0 {
			t.Errorf("the failed multi-statement string left %d of its rows on the primary, want 0", got)
		}
	})

	t.Run("cancel_on_sigint", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, psql, append(append([]string{}, base...), "-c", "SELECT pg_sleep(30)")...)
		cmd.Env = append(cleanEnv(), o.libpqEnv()...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
		began := time.Now()
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		elapsed := time.Since(began)
		if !strings.Contains(stderr.String(), "canceling statement due to user request") {
			t.Errorf("psql after SIGINT: %v, stderr %q; want the statement cancelled", err, stderr.String())
		}
		if elapsed > 5*time.Second {
			t.Errorf("psql took %s to end after SIGINT", elapsed)
		}
	})

	t.Run("listen_notify", func(t *testing.T) {
		// psql reports notifications after each command. The listener runs
		// LISTEN, then a statement during which the NOTIFY is sent, then one more.
		channel := strings.ReplaceAll(marker("matrix_psql"), "-", "_")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, psql, append(append([]string{}, base...), "-c", "LISTEN "+channel, "-c", "SELECT pg_sleep(1.5)", "-c", "SELECT 1")...)
		cmd.Env = append(cleanEnv(), o.libpqEnv()...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		mustRun(t, "-c", fmt.Sprintf("NOTIFY %s, 'hello from psql'", channel))
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the listening psql failed: %v\nstderr:\n%s", err, stderr.String())
		}
		want := fmt.Sprintf(`Asynchronous notification "%s" with payload "hello from psql" received`, channel)
		if !strings.Contains(stdout.String()+stderr.String(), want) {
			t.Errorf("the listening psql did not report the notification\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		rs := routesOf(t, psqlNotices(stderr.String()), "psql")
		if len(rs) != 3 || rs[0].Role != "primary" || rs[1].Reason != "SESSION_PINNED" || rs[2].Reason != "SESSION_PINNED" {
			t.Errorf("listening psql: NOTICEs %v, want LISTEN on the primary and the session pinned there", rs)
		}
	})

	t.Run("large_result", func(t *testing.T) {
		p := startOwlProcess(t, c)
		run(t, p.endpoint, "-c", "SELECT 1")
		before := p.memoryBaseline(t)
		began := time.Now()
		res := run(t, p.endpoint, "-c", fmt.Sprintf(`\copy (%s) TO '/dev/null'`, largeSQL))
		if res.exitCode != 0 {
			t.Fatalf(`psql \copy of the large result exited with %d: %s`, res.exitCode, res.stderr)
		}
		t.Logf("streamed in %s", time.Since(began).Round(time.Millisecond))
		p.checkFlatMemory(t, "psql large result", before, largeRows*largeWidth)
		wantRoutes(t, "large result", psqlNotices(res.stderr), "psql", 1, "standby", "READ_ONLY")
	})
}
