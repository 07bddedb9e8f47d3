package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// testTimeout bounds each cluster test after startup.
const testTimeout = 45 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// mustExec runs sql on node or fails the test.
func mustExec(t *testing.T, ctx context.Context, node *Node, sql string, args ...any) {
	t.Helper()
	if err := node.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", node.Name, err)
	}
}

// countRows returns SELECT count(*) FROM table on node.
func countRows(t *testing.T, ctx context.Context, node *Node, table string) int64 {
	t.Helper()
	var count int64
	if err := node.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&count); err != nil {
		t.Fatalf("%s: count %s: %v", node.Name, table, err)
	}
	return count
}

// mustLSN parses an LSN or fails the test.
func mustLSN(t *testing.T, lsn string) uint64 {
	t.Helper()
	value, err := ParseLSN(lsn)
	if err != nil {
		t.Fatal(err)
	}
	return value
}

// processesMentioning lists pids whose command line contains text; it skips t without /proc.
func processesMentioning(t *testing.T, text string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to inspect processes: %v", err)
	}
	var found []string
	for _, entry := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), text) {
			continue
		}
		if _, state, ok := procStat(atoiOrZero(entry.Name())); ok && state == 'Z' {
			continue
		}
		found = append(found, entry.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}

func atoiOrZero(text string) int {
	var value int
	_, _ = fmt.Sscanf(text, "%d", &value)
	return value
}

// reachableTempDir makes a base directory the postgres user can enter, removed at test end.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgowl-cluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestReplicationAndPausedReplay(t *testing.T) {
	t.Parallel()
	cluster := StartForTest(t, Options{Standbys: 2})
	ctx := testContext(t)
	if len(cluster.Nodes) != 3 {
		t.Fatalf("got %d nodes, want 3", len(cluster.Nodes))
	}
	primary, paused, streaming := cluster.Nodes[0], cluster.Nodes[1], cluster.Nodes[2]
	for index, node := range cluster.Nodes {
		if want := fmt.Sprintf("pg%d", index+1); node.Name != want {
			t.Errorf("node %d is named %q, want %q", index, node.Name, want)
		}
		inRecovery, err := node.InRecovery(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if wantRecovery := index > 0; inRecovery != wantRecovery {
			t.Errorf("%s: in recovery = %t, want %t", node.Name, inRecovery, wantRecovery)
		}
	}
	found, err := cluster.Primary(ctx)
	if err != nil || found != primary {
		t.Fatalf("Primary() = %v, %v; want pg1", found, err)
	}

	mustExec(t, ctx, primary, "CREATE TABLE replicated (id int PRIMARY KEY, note text)")
	mustExec(t, ctx, primary, "INSERT INTO replicated VALUES ($1, $2)", 1, "first")
	for _, standby := range []*Node{paused, streaming} {
		if err := standby.WaitCaughtUp(ctx, primary); err != nil {
			t.Fatal(err)
		}
		var note string
		if err := standby.QueryRow(ctx, "SELECT note FROM replicated WHERE id = $1", 1).Scan(&note); err != nil {
			t.Fatalf("%s: %v", standby.Name, err)
		}
		if note != "first" {
			t.Errorf("%s: note = %q, want %q", standby.Name, note, "first")
		}
		if err := standby.Exec(ctx, "INSERT INTO replicated VALUES (99, 'nope')"); err == nil {
			t.Errorf("%s: a standby accepted a write", standby.Name)
		}
	}

	if err := paused.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, primary, "INSERT INTO replicated SELECT g, 'bulk' FROM generate_series(2, 1000) g")
	primaryLSN, err := primary.CurrentLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := streaming.WaitReplayed(ctx, primaryLSN); err != nil {
		t.Fatal(err)
	}
	if got := countRows(t, ctx, streaming, "replicated"); got != 1000 {
		t.Errorf("streaming standby sees %d rows, want 1000", got)
	}
	pausedLSN, err := paused.ReplayLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mustLSN(t, pausedLSN) >= mustLSN(t, primaryLSN) {
		t.Errorf("paused standby replayed %s, want behind primary %s", pausedLSN, primaryLSN)
	}
	if got := countRows(t, ctx, paused, "replicated"); got != 1 {
		t.Errorf("paused standby sees %d rows, want 1", got)
	}
	shortCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = paused.WaitReplayed(shortCtx, primaryLSN)
	cancel()
	if !HasCode(err, CodeTimeout) {
		t.Errorf("WaitReplayed on a paused standby = %v, want a CodeTimeout error", err)
	}

	if err := paused.ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := paused.WaitCaughtUp(ctx, primary); err != nil {
		t.Fatal(err)
	}
	if got := countRows(t, ctx, paused, "replicated"); got != 1000 {
		t.Errorf("resumed standby sees %d rows, want 1000", got)
	}
}

func TestKillPromoteAndRewire(t *testing.T) {
	t.Parallel()
	cluster := StartForTest(t, Options{Standbys: 2})
	ctx := testContext(t)
	oldPrimary := cluster.Nodes[0]
	mustExec(t, ctx, oldPrimary, "CREATE TABLE failover (id int)")
	tableLSN, err := oldPrimary.CurrentLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, standby := range cluster.Nodes[1:] {
		if err := standby.WaitReplayed(ctx, tableLSN); err != nil {
			t.Fatal(err)
		}
	}

	if err := oldPrimary.Kill(); err != nil {
		t.Fatal(err)
	}
	// Promote the standby that replayed the most, as a real failover must: the other one
	// can only follow a new timeline that forks at or after its own replay position.
	promoted, follower := cluster.Nodes[1], cluster.Nodes[2]
	promotedLSN, err := promoted.ReplayLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	followerLSN, err := follower.ReplayLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mustLSN(t, followerLSN) > mustLSN(t, promotedLSN) {
		promoted, follower = follower, promoted
	}
	if err := oldPrimary.Exec(ctx, "SELECT 1"); !HasCode(err, CodeQuery) {
		t.Fatalf("killed node answered: err = %v", err)
	}
	if leftovers := processesMentioning(t, oldPrimary.DataDir); len(leftovers) > 0 {
		t.Errorf("processes survived Kill: %v", leftovers)
	}
	if _, err := cluster.Primary(ctx); !HasCode(err, CodeState) {
		t.Errorf("Primary() with the primary dead = %v, want a CodeState error", err)
	}

	if err := promoted.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	inRecovery, err := promoted.InRecovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inRecovery {
		t.Fatalf("%s still in recovery after Promote", promoted.Name)
	}
	if count := countRows(t, ctx, promoted, "failover"); count != 0 {
		t.Fatalf("new table has %d rows, want 0", count)
	}
	found, err := cluster.Primary(ctx)
	if err != nil || found != promoted {
		t.Fatalf("Primary() = %v, %v; want %s", found, err, promoted.Name)
	}

	if err := follower.Rewire(ctx, promoted); err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, promoted, "INSERT INTO failover SELECT generate_series(1, 10)")
	if err := follower.WaitCaughtUp(ctx, promoted); err != nil {
		t.Fatal(err)
	}
	if got := countRows(t, ctx, follower, "failover"); got != 10 {
		t.Errorf("rewired follower sees %d rows, want 10", got)
	}

	// A killed node restarts through crash recovery; here the old primary comes back as a
	// second primary, which Primary() must report instead of picking one.
	if err := oldPrimary.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Primary(ctx); !HasCode(err, CodeState) || !strings.Contains(err.Error(), "several") {
		t.Errorf("Primary() with two primaries = %v, want a 'several' CodeState error", err)
	}
	if err := oldPrimary.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := oldPrimary.Exec(ctx, "SELECT 1"); !HasCode(err, CodeQuery) {
		t.Errorf("stopped node answered: err = %v", err)
	}
}

func TestStatementStatsOnStandby(t *testing.T) {
	t.Parallel()
	cluster := StartForTest(t, Options{
		Standbys: 1,
		Users:    []User{{Name: "app", Password: "s3cret'pw"}},
	})
	ctx := testContext(t)
	primary, standby := cluster.Nodes[0], cluster.Nodes[1]
	for _, node := range cluster.Nodes {
		if err := node.ResetStatementStats(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const runs = 3
	for range runs {
		mustExec(t, ctx, standby, "SELECT 42 AS pgowl_stats_probe")
	}
	const pattern = "%pgowl_stats_probe%"
	cases := []struct {
		node *Node
		want int64
	}{
		{node: standby, want: runs},
		{node: primary, want: 0},
	}
	for _, tc := range cases {
		calls, err := tc.node.StatementCalls(ctx, pattern)
		if err != nil {
			t.Fatal(err)
		}
		if calls != tc.want {
			t.Errorf("%s: StatementCalls(%q) = %d, want %d", tc.node.Name, pattern, calls, tc.want)
		}
	}
	// The harness's own statistics query must not count, even for a pattern matching it.
	if calls, err := standby.StatementCalls(ctx, "%pg_stat_statements%"); err != nil || calls != 0 {
		t.Errorf("StatementCalls counted itself: %d, %v", calls, err)
	}
	if err := standby.ResetStatementStats(ctx); err != nil {
		t.Fatal(err)
	}
	if calls, err := standby.StatementCalls(ctx, pattern); err != nil || calls != 0 {
		t.Errorf("after reset: StatementCalls = %d, %v; want 0", calls, err)
	}

	// The replicated user logs in with its password on the standby; a wrong password fails.
	logins := []struct {
		password string
		wantOK   bool
	}{
		{password: "s3cret'pw", wantOK: true},
		{password: "wrong", wantOK: false},
		{password: "", wantOK: false},
	}
	for _, login := range logins {
		conn, err := pgx.Connect(ctx, standby.DSN("app", login.password, "postgres"))
		if (err == nil) != login.wantOK {
			t.Errorf("login as app with password %q: err = %v, want ok = %t", login.password, err, login.wantOK)
		}
		if err == nil {
			var user string
			if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != "app" {
				t.Errorf("current_user = %q, %v", user, err)
			}
			_ = conn.Close(ctx)
		}
	}
}

func TestCloseStopsEverything(t *testing.T) {
	t.Parallel()
	cluster := StartForTest(t, Options{Standbys: 1, Settings: map[string]string{"work_mem": "7MB"}})
	ctx := testContext(t)
	for _, node := range cluster.Nodes {
		var workMem string
		if err := node.QueryRow(ctx, "SHOW work_mem").Scan(&workMem); err != nil || workMem != "7MB" {
			t.Errorf("%s: work_mem = %q, %v; want 7MB from Options.Settings", node.Name, workMem, err)
		}
		if _, err := os.Stat(node.LogPath()); err != nil {
			t.Errorf("%s: log file: %v", node.Name, err)
		}
	}
	if len(processesMentioning(t, cluster.Dir)) == 0 {
		t.Fatal("no running process mentions the cluster directory; the process check is broken")
	}
	// A killed node leaves postmaster.pid and its shared memory segment; Close removes both.
	killed := cluster.Nodes[1]
	segmentID := sharedMemoryID(t, killed)
	if err := killed.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.SysvShmCtl(segmentID, unix.IPC_STAT, &unix.SysvShmDesc{}); err != nil {
		t.Fatalf("segment %d of the killed node is already gone (%v); the check is broken", segmentID, err)
	}
	if err := cluster.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := os.Stat(cluster.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory still exists: %v", err)
	}
	if leftovers := processesMentioning(t, cluster.Dir); len(leftovers) > 0 {
		t.Errorf("processes survived Close: %v", leftovers)
	}
	for _, node := range cluster.Nodes {
		if err := node.Exec(ctx, "SELECT 1"); err == nil {
			t.Errorf("%s still answers after Close", node.Name)
		}
	}
	if _, err := unix.SysvShmCtl(segmentID, unix.IPC_STAT, &unix.SysvShmDesc{}); err == nil {
		t.Errorf("shared memory segment %d of the killed node survived Close", segmentID)
	}
}

// sharedMemoryID reads the System V segment id from a running node's postmaster.pid.
func sharedMemoryID(t *testing.T, node *Node) int {
	t.Helper()
	content, err := os.ReadFile(filepath.Join(node.DataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(content), "\n")
	if len(lines) < 7 || len(strings.Fields(lines[6])) != 2 {
		t.Fatalf("postmaster.pid has no shared memory line:\n%s", content)
	}
	return atoiOrZero(strings.Fields(lines[6])[1])
}

func TestStartFailuresCleanUp(t *testing.T) {
	t.Parallel()
	if err := CheckBinaries(Options{}); err != nil {
		t.Skipf("skipping: %v", err)
	}
	cases := []struct {
		name     string
		opts     Options
		timeout  time.Duration // 0 means testTimeout
		wantCode Code          // 0 accepts any code
	}{
		{name: "negative standbys", opts: Options{Standbys: -1}, wantCode: CodeInvalidOptions},
		{name: "unknown hba method", opts: Options{HBAMethod: "ident-ish"}, wantCode: CodeInvalidOptions},
		{name: "bad setting name", opts: Options{Settings: map[string]string{"a b": "1"}}, wantCode: CodeInvalidOptions},
		{name: "duplicate user", opts: Options{Users: []User{{Name: "u"}, {Name: "u"}}}, wantCode: CodeInvalidOptions},
		{name: "missing binaries", opts: Options{BinDir: "/nonexistent/pg/bin"}, wantCode: CodeBinariesMissing},
		// The server refuses to start: the failure happens in pg_ctl start.
		{name: "bad setting value", opts: Options{Settings: map[string]string{"shared_buffers": "lots"}}, wantCode: CodeCommand},
		// The primary is running when CREATE ROLE fails: Start must stop it.
		{name: "reserved role name", opts: Options{Standbys: 1, Users: []User{{Name: "pg_reserved", Password: "x"}}}, wantCode: CodeQuery},
		// Startup takes seconds; a context ending midway must still leave nothing behind,
		// whichever step it interrupts.
		{name: "context ends during start", opts: Options{Standbys: 2}, timeout: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			baseDir := reachableTempDir(t)
			tc.opts.BaseDir = baseDir
			tc.opts.Logf = t.Logf
			timeout := testTimeout
			if tc.timeout > 0 {
				timeout = tc.timeout
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			cluster, err := Start(ctx, tc.opts)
			if err == nil {
				_ = cluster.Close()
				t.Fatal("Start succeeded, want an error")
			}
			var clusterErr *Error
			if !errors.As(err, &clusterErr) {
				t.Errorf("Start error %v is not a *Error", err)
			}
			if tc.wantCode != 0 && !HasCode(err, tc.wantCode) {
				t.Errorf("Start error = %v, want code %s", err, tc.wantCode)
			}
			if IsBinariesMissing(err) != (tc.wantCode == CodeBinariesMissing) {
				t.Errorf("IsBinariesMissing(%v) is wrong", err)
			}
			entries, readErr := os.ReadDir(baseDir)
			if readErr != nil || len(entries) != 0 {
				t.Errorf("base directory not cleaned up: %v %v", entries, readErr)
			}
			if leftovers := processesMentioning(t, baseDir); len(leftovers) > 0 {
				t.Errorf("processes survived a failed Start: %v", leftovers)
			}
		})
	}
}

func TestUnreachableBaseDirAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands the cluster directory to another user")
	}
	if err := CheckBinaries(Options{}); err != nil {
		t.Skipf("skipping: %v", err)
	}
	privateDir := t.TempDir() // 0700 parents owned by root
	if err := os.Chmod(privateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{BaseDir: privateDir})
	if !HasCode(err, CodeSetup) || !strings.Contains(err.Error(), "not searchable by user postgres") {
		t.Errorf("Start in a root-only directory = %v, want a CodeSetup error naming the directory", err)
	}
}

// watchdogHelperEnv makes the test binary act as a process that starts a cluster and then
// dies without closing it.
const watchdogHelperEnv = "PGOWL_CLUSTER_WATCHDOG_HELPER"

func TestWatchdogHelperProcess(t *testing.T) {
	if os.Getenv(watchdogHelperEnv) != "1" {
		t.Skip("helper process for TestWatchdogCleansUpAfterACrash")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, err := StartWatched(ctx, Options{Standbys: 1})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("DIR", cluster.Dir)
	time.Sleep(time.Minute) // the parent kills us long before this
	os.Exit(1)
}

func TestWatchdogCleansUpAfterACrash(t *testing.T) {
	t.Parallel()
	if err := CheckBinaries(Options{}); err != nil {
		t.Skipf("skipping: %v", err)
	}
	ctx := testContext(t)
	helper := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWatchdogHelperProcess$", "-test.count=1")
	helper.Env = append(os.Environ(), watchdogHelperEnv+"=1")
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		if rest, found := strings.CutPrefix(scanner.Text(), "DIR "); found {
			dir = rest
			break
		}
		t.Logf("helper: %s", scanner.Text())
	}
	if dir == "" {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		t.Fatal("helper did not report a cluster directory")
	}
	if len(processesMentioning(t, dir)) == 0 {
		t.Fatal("helper's cluster is not running; nothing to clean up")
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	for {
		_, statErr := os.Stat(dir)
		leftovers := processesMentioning(t, dir)
		if errors.Is(statErr, os.ErrNotExist) && len(leftovers) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("watchdog did not clean up %s: stat %v, processes %v", dir, statErr, leftovers)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
