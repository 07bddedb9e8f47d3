package integration

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/integration/owltest"
)

// reloadUser is the login whose password the reload changes; pgbench runs as appUser.
const reloadUser = "owl_reload"

// TestReloadUnderPgbench reloads the configuration with SIGHUP while
// pgbench -T 20 -c 16 runs TPC-B through pgowl: the new file adds a standby,
// changes a user's password and tightens routing.max_replica_lag. pgbench
// must see no failed transaction, and the new settings must be in force
// within one second; pg3 serves reads within one second plus what pg3 takes
// to start the two backends a read there needs (measured by a direct
// connection at the same moment: under this load on two CPUs, a backend's
// start alone took up to 700 ms). Then a file that fails validation is
// refused, by SIGHUP and by the console's RELOAD, and changes nothing.
func TestReloadUnderPgbench(t *testing.T) {
	c := ownCluster(t, 2)
	ctx := timeoutCtx(t, 3*time.Minute)
	primary := c.Nodes[0]
	if err := primary.Exec(ctx, "CREATE ROLE "+reloadUser+" LOGIN PASSWORD 'old-secret'"); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	users := func(password string) string {
		return "  - {name: " + reloadUser + ", password: " + strconv.Quote(password) + "}\n"
	}
	before := owlYAML(c, port, []string{"pg1", "pg2"}, appPassword, "routing: {max_replica_lag: 5s, standby_choice: round_robin}\n")
	before = strings.Replace(before, "users:\n", "users:\n"+users("old-secret"), 1)
	p := startProcessOwl(t, port, before)
	p.waitLog(t, proxyReadyTimeout, "pgowl serving")

	pgbench := pgBinary(t, "pgbench")
	if res := runCmd(t, 2*time.Minute, p.env(appPassword), pgbench, "-i", "-s", "1", "--quiet"); res.exitCode != 0 {
		t.Fatalf("pgbench -i exited with %d\n%s\n%s", res.exitCode, res.stdout, res.stderr)
	}
	if err := c.Nodes[2].WaitCaughtUp(ctx, primary); err != nil {
		t.Fatal(err)
	}

	var bench cmdResult
	var benchDone sync.WaitGroup
	benchDone.Go(func() {
		bench = runCmd(t, 90*time.Second, p.env(appPassword), pgbench, "-n", "-T", "20", "-c", "16", "-j", "2")
	})
	time.Sleep(4 * time.Second)

	// The new file: pg3 added, a new password, a tighter lag limit.
	after := owlYAML(c, port, []string{"pg1", "pg2", "pg3"}, appPassword, "routing: {max_replica_lag: 1s, standby_choice: round_robin}\n")
	after = strings.Replace(after, "users:\n", "users:\n"+users("new-secret"), 1)
	if err := primary.Exec(ctx, "ALTER ROLE "+reloadUser+" PASSWORD 'new-secret'"); err != nil {
		t.Fatal(err)
	}
	// Connections opened before the reload: sessions are kept, and read the new settings.
	reader := connectRouted(t, ctx, p.dsn(appPassword, appDatabase))
	shower := connectRouted(t, ctx, p.dsn(appPassword, appDatabase))
	if reader == nil || shower == nil {
		t.Fatal("cannot connect to pgowl before the reload")
	}
	// The reader reads once before the reload, so that what is timed after it is the reload's
	// effect, not the first backend connection of a new login to a node the reload keeps (a
	// dial takes up to 700 ms under this load). pg3's first connection is still timed.
	if _, err := reader.read(ctx); err != nil {
		t.Fatalf("read before the reload: %v", err)
	}
	p.rewrite(t, after)
	signalled := time.Now()
	p.signal(t, syscall.SIGHUP)
	// What pg3 itself takes, under this load, to start a backend and answer its first query:
	// serving a read through pgowl takes two of those in turn (the monitor's first poll of the
	// added node, then the reader's first backend there), which pgowl cannot shorten. Measured
	// directly, from the SIGHUP, with the reader's login.
	var pg3Start time.Duration
	var probed sync.WaitGroup
	probed.Go(func() {
		conn, err := pgx.Connect(ctx, c.Nodes[2].DSN(appUser, appPassword, appDatabase))
		if err != nil {
			t.Errorf("connect to pg3 directly: %v", err)
			return
		}
		defer conn.Close(ctx)
		var inRecovery bool
		if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
			t.Errorf("first query on pg3: %v", err)
			return
		}
		pg3Start = time.Since(signalled)
	})

	// Within one second: the old password is refused, the new one works,
	// pg3 serves reads and the session limit reads 1s. Each is watched on
	// its own, so that one slow login does not delay the others' reading.
	var checks sync.WaitGroup
	watch := func(check func() bool) *time.Duration {
		at := new(time.Duration)
		checks.Go(func() {
			for time.Since(signalled) < 3*time.Second {
				if check() {
					*at = time.Since(signalled)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
		return at
	}
	reloadDSN := func(password string) string {
		return strings.Replace(p.dsn(password, appDatabase), appUser, reloadUser, 1)
	}
	oldRefused := watch(func() bool {
		conn, err := pgx.Connect(ctx, reloadDSN("old-secret"))
		if err == nil {
			conn.Close(ctx)
			return false
		}
		pgErr, ok := asPgError(err)
		return ok && pgErr.Code == "28P01"
	})
	newWorks := watch(func() bool {
		conn, err := pgx.Connect(ctx, reloadDSN("new-secret"))
		if err == nil {
			conn.Close(ctx)
		}
		return err == nil
	})
	pg3Reads := watch(func() bool {
		node, err := reader.read(ctx)
		return err == nil && node == "pg3"
	})
	tightLimit := watch(func() bool {
		var limit string
		err := shower.conn.QueryRow(ctx, "SHOW pgowl.max_replica_lag").Scan(&limit)
		return err == nil && limit == "1s"
	})
	checks.Wait()
	probed.Wait()
	reader.conn.Close(ctx)
	shower.conn.Close(ctx)
	t.Logf("after SIGHUP: old password refused at %s, new password accepted at %s, pg3 served a read at %s, max_replica_lag 1s at %s; a direct connection's first query on pg3 took %s",
		*oldRefused, *newWorks, *pg3Reads, *tightLimit, pg3Start)
	for what, at := range map[string]time.Duration{"old password refused": *oldRefused, "new password accepted": *newWorks,
		"max_replica_lag is 1s": *tightLimit} {
		if at == 0 || at > time.Second {
			t.Errorf("%s: at %s after SIGHUP, want within 1s (0 = never within 3s)", what, at)
		}
	}
	// pg3 serves reads within 1s plus the two backend starts on pg3 that a read there needs.
	if limit := time.Second + 2*pg3Start; *pg3Reads == 0 || *pg3Reads > limit {
		t.Errorf("pg3 serves reads: at %s after SIGHUP, want within %s: 1s plus twice the %s pg3 took to serve a direct connection's first query (0 = never within 3s)",
			*pg3Reads, limit, pg3Start)
	}
	line := p.waitLog(t, time.Second, "configuration reloaded")
	t.Logf("the reload's log line: %s", line)
	if !strings.Contains(line, "pg3") {
		t.Errorf("the reload's log line does not name the added node: %s", line)
	}

	// The tighter limit refuses reads that the old one would have served:
	// with replay paused on both standbys, their lag passes 1s (not 5s).
	for _, n := range c.Nodes[1:] {
		if err := n.PauseReplay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1800 * time.Millisecond)
	lagged := connectRouted(t, ctx, p.dsn(appPassword, appDatabase))
	if lagged == nil {
		t.Fatal("cannot connect to pgowl")
	}
	served, readErr := lagged.read(ctx)
	lagged.conn.Close(ctx)
	for _, n := range c.Nodes[1:] {
		if err := n.ResumeReplay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if readErr == nil {
		t.Errorf("a read with both standbys' replay paused for 1.8s was served by %s; the 1s limit should refuse it", served)
	} else {
		t.Logf("with replay paused 1.8s the read is refused: %v", readErr)
	}

	benchDone.Wait()
	if bench.exitCode != 0 || strings.Contains(bench.stderr, "aborted") {
		t.Errorf("pgbench exited with %d during the reload\nstdout:\n%s\nstderr:\n%s", bench.exitCode, bench.stdout, bench.stderr)
	}
	if f := pgbenchFailed.FindStringSubmatch(bench.stdout); f == nil || f[1] != "0" {
		t.Errorf("pgbench reports failed transactions %v\n%s", f, bench.stdout)
	}
	t.Logf("pgbench during the reload:\n%s", bench.stdout)

	// A file that fails validation is refused whole, by SIGHUP and by RELOAD.
	invalid := strings.Replace(after, "max_replica_lag: 1s", "max_replica_lag: -3s", 1)
	invalid = strings.Replace(invalid, "new-secret", "third-secret", 1)
	p.rewrite(t, invalid)
	p.signal(t, syscall.SIGHUP)
	refusal := p.waitLog(t, 2*time.Second, "reload refused")
	if !strings.Contains(refusal, "routing.max_replica_lag") {
		t.Errorf("the refusal does not name the key at fault: %s", refusal)
	}
	console, err := pgx.Connect(ctx, p.dsn(appPassword, "pgowl")+"&default_query_exec_mode=simple_protocol")
	if err != nil {
		t.Fatal(err)
	}
	_, err = console.Exec(ctx, "RELOAD")
	console.Close(ctx)
	if pgErr, ok := asPgError(err); !ok || pgErr.Code != "F0000" || !strings.Contains(pgErr.Message, "routing.max_replica_lag") {
		t.Errorf("console RELOAD of an invalid file: %v, want F0000 naming routing.max_replica_lag", err)
	}
	if conn, err := pgx.Connect(ctx, strings.Replace(p.dsn("new-secret", appDatabase), appUser, reloadUser, 1)); err != nil {
		t.Errorf("after the refused reload the password in force no longer works: %v", err)
	} else {
		var limit string
		if err := conn.QueryRow(ctx, "SHOW pgowl.max_replica_lag").Scan(&limit); err != nil || limit != "1s" {
			t.Errorf("after the refused reload max_replica_lag is %q (%v), want 1s", limit, err)
		}
		conn.Close(ctx)
	}
}

// routedConn is a connection that remembers the node of the last routing NOTICE.
type routedConn struct {
	conn *pgx.Conn
	mu   sync.Mutex
	node string
}

// connectRouted connects to dsn; nil when the connection fails.
func connectRouted(t *testing.T, ctx context.Context, dsn string) *routedConn {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	rc := &routedConn{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if isRouteNotice(n) {
			route, _ := owltest.ParseRoute(t, n.Message, n.Detail)
			rc.mu.Lock()
			rc.node = route.Node
			rc.mu.Unlock()
		}
	}
	if rc.conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		return nil
	}
	return rc
}

// read runs a read of a pgbench table and returns the node that served it.
func (rc *routedConn) read(ctx context.Context) (string, error) {
	rc.mu.Lock()
	rc.node = ""
	rc.mu.Unlock()
	var n int
	if err := rc.conn.QueryRow(ctx, "SELECT count(*) FROM pgbench_branches").Scan(&n); err != nil {
		return "", err
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.node, nil
}
