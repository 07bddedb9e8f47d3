package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// nodeProcesses returns the PIDs of a node's postmaster and of its children.
func nodeProcesses(t *testing.T, n *cluster.Node) []int {
	t.Helper()
	content, err := os.ReadFile(filepath.Join(n.DataDir, "postmaster.pid"))
	if err != nil {
		t.Fatalf("read %s's postmaster.pid: %v", n.Name, err)
	}
	postmaster, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(content), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("%s's postmaster.pid: %v", n.Name, err)
	}
	pids := []int{postmaster}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(postmaster) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// signalNode sends sig to every process of n.
func signalNode(t *testing.T, pids []int, sig syscall.Signal) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
			t.Errorf("signal %v to %d: %v", sig, pid, err)
		}
	}
}

// TestStoppedStandbyReadsMoveWithinTheLimit: a standby whose processes are
// SIGSTOPped still acknowledges TCP, so nothing but the monitor notices it.
// Reads that were waiting on it, or being given a new connection to it, move
// to the other standby once it has waited limits.first_reply_timeout and the
// monitor finds it unresponsive; every read succeeds and none waits longer
// than first_reply_timeout + monitor.down_after and a second.
func TestStoppedStandbyReadsMoveWithinTheLimit(t *testing.T) {
	c := ownCluster(t, 2)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.StandbyChoice = config.StandbyRoundRobin
		cfg.Limits.FirstReplyTimeout = time.Second
	})
	bound := o.cfg.Limits.FirstReplyTimeout + o.cfg.Monitor.DownAfter + time.Second
	stopped, healthy := c.Nodes[1], c.Nodes[2]
	nodeOfPort := map[string]string{}
	for _, n := range c.Nodes {
		nodeOfPort[strconv.Itoa(n.Port)] = n.Name
	}

	const clients = 8
	var conns []*client
	for range clients {
		conns = append(conns, o.connect(t, func(cfg *pgx.ConnConfig) { cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol }))
	}
	type read struct {
		at   time.Time
		took time.Duration
		node string
		err  error
	}
	readOnce := func(conn *client) read {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		var port string
		var slept string
		// A short sleep keeps reads in flight on both standbys at any moment.
		err := conn.QueryRow(ctx, "SELECT current_setting('port'), pg_sleep(0.05)::text").Scan(&port, &slept)
		return read{at: start, took: time.Since(start), node: nodeOfPort[port], err: err}
	}
	warm := map[string]int{}
	for range 4 {
		for _, conn := range conns {
			r := readOnce(conn)
			if r.err != nil {
				t.Fatalf("warm-up read: %v", r.err)
			}
			warm[r.node]++
		}
	}
	if warm[stopped.Name] == 0 || warm[healthy.Name] == 0 {
		t.Fatalf("warm-up reads did not reach both standbys: %v", warm)
	}

	var (
		mu    sync.Mutex
		reads []read
		wg    sync.WaitGroup
	)
	stopAt := time.Now().Add(time.Second)
	until := stopAt.Add(5 * time.Second)
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) {
				r := readOnce(conn)
				mu.Lock()
				reads = append(reads, r)
				mu.Unlock()
				if r.err != nil && conn.PgConn().IsClosed() {
					return
				}
			}
		}()
	}
	time.Sleep(time.Until(stopAt))
	// The postmaster first, so that it forks no backend the list misses.
	pids := nodeProcesses(t, stopped)
	signalNode(t, pids[:1], syscall.SIGSTOP)
	pids = nodeProcesses(t, stopped)
	signalNode(t, pids, syscall.SIGSTOP)
	stoppedAt := time.Now()
	t.Cleanup(func() { signalNode(t, nodeProcesses(t, stopped), syscall.SIGCONT) })
	t.Logf("SIGSTOPped %s (%d processes)", stopped.Name, len(pids))
	wg.Wait()
	signalNode(t, pids, syscall.SIGCONT)

	var failed, afterStop, servedByStopped int
	var slowest time.Duration
	var slow []string
	byNode := map[string]int{}
	for _, r := range reads {
		if r.err != nil {
			failed++
			t.Errorf("a read at %s after the stop failed: %v", r.at.Sub(stoppedAt).Round(time.Millisecond), r.err)
			continue
		}
		if r.at.Add(r.took).Before(stoppedAt) {
			continue
		}
		afterStop++
		byNode[r.node]++
		if r.at.After(stoppedAt) && r.node == stopped.Name {
			servedByStopped++
		}
		slowest = max(slowest, r.took)
		if r.took > bound {
			slow = append(slow, fmt.Sprintf("%s (started %s after the stop)", r.took.Round(time.Millisecond), r.at.Sub(stoppedAt).Round(time.Millisecond)))
		}
	}
	sort.Strings(slow)
	t.Logf("%d reads ended after the stop, served by %v; slowest %s (bound %s); %d failed", afterStop, byNode, slowest.Round(time.Millisecond), bound, failed)
	if servedByStopped > 0 {
		t.Errorf("%d reads started after the stop were served by the stopped standby", servedByStopped)
	}
	if len(slow) > 0 {
		t.Errorf("%d reads waited longer than %s: %v", len(slow), bound, slow)
	}
	if byNode[healthy.Name] == 0 {
		t.Errorf("no read moved to %s", healthy.Name)
	}
}
