package integration

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgbenchAbort finds a client's abort message. It is not anchored to a line:
// pgbench's threads write the "pgbench: error: " prefix and the message
// separately, so two threads' messages can share a line.
var pgbenchAbort = regexp.MustCompile(`client (\d+) [^\n]*?aborted`)

// abortedClients counts the clients pgbench reports aborted in stderr.
func abortedClients(stderr string) int {
	clients := map[string]bool{}
	for _, m := range pgbenchAbort.FindAllStringSubmatch(stderr, -1) {
		clients[m[1]] = true
	}
	return len(clients)
}

// pgbenchCommitted is the count pgbench prints of the transactions it saw committed.
var pgbenchCommitted = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)

// TestShutdownDuringTPCB sends SIGTERM to pgowl (a process built from this
// tree) while pgbench runs TPC-B with 32 clients: every transaction pgbench
// counted as committed must be on the primary (one pgbench_history row
// each), every client must end on FATAL 57P01 "pgowl is shutting down"
// rather than a reset, and pgowl must exit 0 (no transaction was rolled back).
func TestShutdownDuringTPCB(t *testing.T) {
	c := ownCluster(t, 1)
	port := freePort(t)
	p := startProcessOwl(t, port, owlYAML(c, port, []string{"pg1", "pg2"}, appPassword, "shutdown_timeout: 10s\nrouting: {notice: false}\n"))
	p.waitLog(t, proxyReadyTimeout, "pgowl serving")
	pgbench := pgBinary(t, "pgbench")
	if res := runCmd(t, 2*time.Minute, p.env(appPassword), pgbench, "-i", "-s", "1", "--quiet"); res.exitCode != 0 {
		t.Fatalf("pgbench -i exited with %d\n%s\n%s", res.exitCode, res.stdout, res.stderr)
	}
	var bench cmdResult
	var done sync.WaitGroup
	done.Go(func() {
		bench = runCmd(t, 2*time.Minute, p.env(appPassword), pgbench, "-T", "30", "-c", "32", "-j", "2")
	})
	time.Sleep(5 * time.Second)
	signalled := time.Now()
	p.signal(t, syscall.SIGTERM)
	code := p.wait(t, 30*time.Second)
	t.Logf("pgowl exited with %d, %s after SIGTERM", code, time.Since(signalled).Round(time.Millisecond))
	done.Wait()
	if code != 0 {
		t.Errorf("pgowl exited with %d, want 0: TPC-B transactions end well within shutdown_timeout", code)
	}
	p.waitLog(t, time.Second, "pgowl is shutting down")
	p.waitLog(t, time.Second, "pgowl drained")

	m := pgbenchCommitted.FindStringSubmatch(bench.stdout)
	if m == nil {
		t.Fatalf("pgbench printed no transaction count\nstdout:\n%s\nstderr:\n%s", bench.stdout, bench.stderr)
	}
	committed, _ := strconv.Atoi(m[1])
	ctx := timeoutCtx(t, statementTimeout)
	var rows int
	if err := c.Nodes[0].QueryRow(ctx, "SELECT count(*) FROM pgbench_history").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("pgbench counted %d committed transactions; the primary holds %d pgbench_history rows", committed, rows)
	if rows < committed {
		t.Errorf("%d transactions acknowledged as committed, but only %d are on the primary", committed, rows)
	}
	// pgbench prints the server's message, then (for errors outside a
	// query's result) a line saying that the client aborted.
	aborts := abortedClients(bench.stderr)
	documented := strings.Count(bench.stderr, "FATAL:  pgowl is shutting down")
	t.Logf("%d clients aborted; FATAL 57P01 \"pgowl is shutting down\" was reported %d times", aborts, documented)
	if aborts != 32 || documented != 32 {
		t.Errorf("%d clients aborted and %d saw the documented error, want 32 and 32\nstderr:\n%s", aborts, documented, tailOf(bench.stderr, 8<<10))
	}
	for _, reset := range []string{"server closed the connection unexpectedly", "Connection reset", "could not receive data"} {
		if strings.Contains(bench.stderr, reset) {
			t.Errorf("a client saw %q rather than the documented error", reset)
		}
	}
}

// TestShutdownRollsBackAtTheDeadline leaves a transaction open through
// SIGTERM: at shutdown_timeout it is rolled back, its client is told so
// with 57P01, an idle client gets 57P01 at once, and pgowl exits with 3.
func TestShutdownRollsBackAtTheDeadline(t *testing.T) {
	c := ownCluster(t, 1)
	ctx := timeoutCtx(t, time.Minute)
	if err := c.Nodes[0].Exec(ctx, "CREATE TABLE t21_shutdown (id int); GRANT ALL ON t21_shutdown TO "+appUser); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	p := startProcessOwl(t, port, owlYAML(c, port, []string{"pg1", "pg2"}, appPassword, "shutdown_timeout: 1s\n"))
	p.waitLog(t, proxyReadyTimeout, "pgowl serving")
	open, err := pgx.Connect(ctx, p.dsn(appPassword, appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(ctx)
	idle, err := pgx.Connect(ctx, p.dsn(appPassword, appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close(ctx)
	for _, sql := range []string{"BEGIN", "INSERT INTO t21_shutdown VALUES (1)"} {
		if _, err := open.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	signalled := time.Now()
	p.signal(t, syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	_, idleErr := idle.Exec(ctx, "SELECT 1")
	if pgErr, ok := asPgError(idleErr); !ok || pgErr.Code != "57P01" || pgErr.Message != "pgowl is shutting down" {
		t.Errorf("idle client after SIGTERM: %v, want FATAL 57P01 pgowl is shutting down", idleErr)
	}
	code := p.wait(t, 10*time.Second)
	t.Logf("pgowl exited with %d, %s after SIGTERM", code, time.Since(signalled).Round(time.Millisecond))
	if code != 3 {
		t.Errorf("exit code %d, want 3 (a transaction was rolled back at shutdown_timeout)", code)
	}
	_, openErr := open.Exec(ctx, "COMMIT")
	if pgErr, ok := asPgError(openErr); !ok || pgErr.Code != "57P01" || !strings.Contains(pgErr.Message, "rolled back") {
		t.Errorf("client in a transaction after the deadline: %v, want FATAL 57P01 saying it was rolled back", openErr)
	}
	var rows int
	if err := c.Nodes[0].QueryRow(ctx, "SELECT count(*) FROM t21_shutdown").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("t21_shutdown holds %d rows (%v), want 0: the open transaction was rolled back", rows, err)
	}
	p.waitLog(t, time.Second, "shutdown_timeout passed")
}

// TestShutdownSecondSignal: during the grace a statement already running
// outside a transaction finishes normally, and a second SIGTERM ends pgowl
// at once with exit code 4 although a transaction is still open.
func TestShutdownSecondSignal(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, time.Minute)
	port := freePort(t)
	p := startProcessOwl(t, port, owlYAML(c, port, []string{"pg1", "pg2", "pg3"}, appPassword, "shutdown_timeout: 60s\n"))
	p.waitLog(t, proxyReadyTimeout, "pgowl serving")
	open, err := pgx.Connect(ctx, p.dsn(appPassword, appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(ctx)
	for _, sql := range []string{"BEGIN", "SELECT 1"} {
		if _, err := open.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	sleeper, err := pgx.Connect(ctx, p.dsn(appPassword, appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer sleeper.Close(ctx)
	slept := make(chan error, 1)
	const sleep = "SELECT pg_sleep(1.51)"
	go func() {
		_, err := sleeper.Exec(ctx, sleep)
		slept <- err
	}()
	// The signal must find the read running on its node: on a loaded machine the client's
	// connection and prepare can take longer than any fixed pause.
	running := false
	for deadline := time.Now().Add(5 * time.Second); !running && time.Now().Before(deadline); {
		for _, n := range c.Nodes {
			var active bool
			if err := n.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE query = $1 AND state = 'active')", sleep).Scan(&active); err == nil && active {
				running = true
			}
		}
		if !running {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !running {
		t.Fatalf("%s did not start on any node within 5s", sleep)
	}
	p.signal(t, syscall.SIGTERM)
	if err := <-slept; err != nil {
		t.Errorf("a read running outside a transaction at SIGTERM failed: %v, want it to finish", err)
	}
	select {
	case <-p.exited:
		t.Fatalf("pgowl exited with %d while a transaction was open and shutdown_timeout is 60s", p.exitCode)
	default:
	}
	second := time.Now()
	p.signal(t, syscall.SIGTERM)
	code := p.wait(t, 5*time.Second)
	t.Logf("second SIGTERM: exit %d after %s", code, time.Since(second).Round(time.Millisecond))
	if code != 4 {
		t.Errorf("exit code %d after a second signal, want 4", code)
	}
	p.waitLog(t, time.Second, "second signal")
}
