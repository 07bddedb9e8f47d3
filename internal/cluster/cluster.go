package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// closeTimeout bounds how long Close spends stopping nodes.
const closeTimeout = 2 * time.Minute

// maxSocketPath is the longest Unix socket path PostgreSQL accepts (sizeof(sun_path) - 1).
const maxSocketPath = 107

// Cluster is a running primary with its streaming standbys.
type Cluster struct {
	// Nodes lists the primary ("pg1") first, then the standbys ("pg2", "pg3", ...).
	Nodes []*Node
	// Dir is the temporary directory holding every node; Close removes it.
	Dir string

	run          *runner
	stopWatchdog func()
	closeOnce    sync.Once
	closeErr     error
}

// Start creates and starts a primary and opts.Standbys streaming standbys, and returns once
// every standby is in recovery and has replayed the primary's current WAL position.
// On failure it stops whatever it started and removes the directory. The servers outlive this
// process if it dies without calling Close; test binaries and benchmarks, which a timeout may
// kill, use StartWatched or StartForTest instead.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	return start(ctx, opts, nil)
}

// StartWatched is Start plus a watchdog: a detached shell process that shuts the servers down
// and removes the directory if this process dies without calling Close (a test binary killed
// by -timeout, a benchmark killed with SIGKILL). Only callers of StartWatched link the watchdog,
// so the pgowl binary, whose demo calls Start, does not carry it.
func StartWatched(ctx context.Context, opts Options) (*Cluster, error) {
	return start(ctx, opts, startWatchdog)
}

// start is Start; a non-nil watch starts a watchdog for the cluster directory and returns its stop function.
func start(ctx context.Context, opts Options, watch func(dir string, logf func(string, ...any)) (stop func())) (*Cluster, error) {
	opts, err := opts.resolved()
	if err != nil {
		return nil, err
	}
	if err := CheckBinaries(opts); err != nil {
		return nil, err
	}
	run, err := newRunner(opts.BinDir, opts.Logf)
	if err != nil {
		return nil, err
	}
	if err := run.checkReachable(opts.BaseDir); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.BaseDir, "pgowl-cluster-")
	if err != nil {
		return nil, newError(CodeSetup, "", "create the cluster directory in "+opts.BaseDir, err)
	}
	run.workDir = dir
	cluster := &Cluster{Dir: dir, run: run, stopWatchdog: func() {}}
	if watch != nil {
		cluster.stopWatchdog = watch(dir, opts.Logf)
	}
	started := false
	defer func() {
		if !started {
			_ = cluster.Close()
		}
	}()
	if err := run.chown(dir); err != nil {
		return nil, err
	}
	if err := cluster.createNodes(opts); err != nil {
		return nil, err
	}
	began := time.Now()
	primary := cluster.Nodes[0]
	if err := cluster.initPrimary(ctx, primary, opts); err != nil {
		return nil, err
	}
	if err := cluster.startStandbys(ctx, primary, cluster.Nodes[1:]); err != nil {
		return nil, err
	}
	opts.Logf("cluster: %d node(s) ready in %s under %s", len(cluster.Nodes), time.Since(began).Round(time.Millisecond), dir)
	started = true
	return cluster, nil
}

// createNodes lays out the node directories and assigns ports.
func (c *Cluster) createNodes(opts Options) error {
	count := opts.Standbys + 1
	ports, err := freePorts(count)
	if err != nil {
		return err
	}
	settings := &sharedSettings{defaults: baseSettings(opts.Standbys), overrides: opts.Settings}
	for index := range count {
		node := &Node{
			Name:     fmt.Sprintf("pg%d", index+1),
			Host:     "127.0.0.1",
			Port:     ports[index],
			run:      c.run,
			settings: settings,
		}
		node.Dir = filepath.Join(c.Dir, node.Name)
		node.DataDir = filepath.Join(node.Dir, "data")
		socketPath := filepath.Join(node.SocketDir(), ".s.PGSQL.65535.lock")
		if len(socketPath) > maxSocketPath {
			return newError(CodeSetup, node.Name, fmt.Sprintf(
				"socket path %s is longer than %d bytes; use a shorter BaseDir", socketPath, maxSocketPath), nil)
		}
		if err := c.run.mkdir(node.Dir); err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, node)
	}
	return nil
}

// initPrimary runs initdb, configures and starts the primary, then creates users and extensions.
func (c *Cluster) initPrimary(ctx context.Context, primary *Node, opts Options) error {
	_, err := c.run.run(ctx, primary.Name, "initdb",
		"-D", primary.DataDir, "-U", Superuser, "-A", "trust", "-E", "UTF8", "--locale=C",
		"--no-sync", "--no-instructions")
	if err != nil {
		return err
	}
	if err := c.run.writeFile(filepath.Join(primary.DataDir, "pg_hba.conf"), renderHBA(opts.HBAMethod)); err != nil {
		return err
	}
	include := fmt.Sprintf("\n# pgowl integration cluster harness\ninclude '%s'\n", configIncludeName)
	if err := c.run.appendFile(filepath.Join(primary.DataDir, "postgresql.conf"), include); err != nil {
		return err
	}
	if err := primary.writeConfig(); err != nil {
		return err
	}
	if err := primary.startRetryingPort(ctx); err != nil {
		return err
	}
	statements := []string{"CREATE EXTENSION IF NOT EXISTS pg_stat_statements"}
	for _, user := range opts.Users {
		role := quoteIdentifier(user.Name)
		statements = append(statements,
			"CREATE ROLE "+role+" LOGIN PASSWORD "+quoteLiteral(user.Password),
			"GRANT CREATE, USAGE ON SCHEMA public TO "+role)
	}
	for _, statement := range statements {
		if err := primary.Exec(ctx, statement); err != nil {
			return err
		}
	}
	c.run.logf("cluster: %s: primary ready on %s with %d user(s)", primary.Name, primary.Addr(), len(opts.Users))
	return nil
}

// startStandbys clones and starts every standby concurrently.
func (c *Cluster) startStandbys(ctx context.Context, primary *Node, standbys []*Node) error {
	errs := make([]error, len(standbys))
	var wait sync.WaitGroup
	for index, standby := range standbys {
		wait.Go(func() {
			errs[index] = c.startStandby(ctx, primary, standby)
		})
	}
	wait.Wait()
	// Report the first failure as the *Error; failures of the others are usually the same cause.
	var first error
	for index, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
			continue
		}
		c.run.logf("cluster: %s: also failed: %v", standbys[index].Name, err)
	}
	return first
}

// startStandby clones the primary with pg_basebackup, starts the copy and waits until it has caught up.
func (c *Cluster) startStandby(ctx context.Context, primary, standby *Node) error {
	_, err := c.run.run(ctx, standby.Name, "pg_basebackup",
		"-D", standby.DataDir, "-h", primary.Host, "-p", fmt.Sprint(primary.Port), "-U", Superuser,
		"-R", "-X", "stream", "-C", "-S", slotName(standby.Name), "--checkpoint=fast", "--no-sync")
	if err != nil {
		return err
	}
	if err := standby.writeConfig(); err != nil {
		return err
	}
	if err := standby.startRetryingPort(ctx); err != nil {
		return err
	}
	inRecovery, err := standby.InRecovery(ctx)
	if err != nil {
		return err
	}
	if !inRecovery {
		return newError(CodeState, standby.Name, "standby started but pg_is_in_recovery() is false", nil)
	}
	if err := standby.WaitCaughtUp(ctx, primary); err != nil {
		return err
	}
	c.run.logf("cluster: %s: standby of %s ready on %s", standby.Name, primary.Name, standby.Addr())
	return nil
}

// startRetryingPort starts a node that has never run; if its port was taken meanwhile by
// another process, it picks a new free port and tries again, a few times.
func (n *Node) startRetryingPort(ctx context.Context) error {
	const attempts = 3
	var err error
	for attempt := 1; attempt <= attempts; attempt++ {
		logBefore := fileSize(n.LogPath())
		if err = n.Start(ctx); err == nil {
			return nil
		}
		if !portTakenSince(n.LogPath(), logBefore) || attempt == attempts {
			return err
		}
		ports, portErr := freePorts(1)
		if portErr != nil {
			return errors.Join(err, portErr)
		}
		n.run.logf("cluster: %s: port %d was taken, retrying on %d", n.Name, n.Port, ports[0])
		n.Port = ports[0]
		if err := n.writeConfig(); err != nil {
			return err
		}
	}
	return err
}

// portTakenSince reports whether the log, after offset, says the listen port was in use.
func portTakenSince(logPath string, offset int64) bool {
	content, err := os.ReadFile(logPath)
	if err != nil || int64(len(content)) < offset {
		return false
	}
	recent := string(content[offset:])
	return strings.Contains(recent, "Address already in use") || strings.Contains(recent, "could not bind")
}

// fileSize returns the size of path, or 0 if it cannot be read.
func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// Node returns the node with the given name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, node := range c.Nodes {
		if node.Name == name {
			return node
		}
	}
	return nil
}

// Primary returns the one node that answers pg_is_in_recovery() = false. Nodes that do not
// answer are skipped; no answer at all, or several primaries, is an error with CodeState.
func (c *Cluster) Primary(ctx context.Context) (*Node, error) {
	var primaries []*Node
	var problems []error
	for _, node := range c.Nodes {
		askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		inRecovery, err := node.InRecovery(askCtx)
		cancel()
		switch {
		case err != nil:
			problems = append(problems, err)
		case !inRecovery:
			primaries = append(primaries, node)
		}
	}
	switch len(primaries) {
	case 1:
		return primaries[0], nil
	case 0:
		return nil, newError(CodeState, "", "no node answers pg_is_in_recovery() = false", errors.Join(problems...))
	default:
		names := make([]string, len(primaries))
		for index, node := range primaries {
			names[index] = node.Name
		}
		return nil, newError(CodeState, "", "several nodes answer as primary: "+strings.Join(names, ", "), nil)
	}
}

// Close stops every node in immediate mode and removes the cluster directory.
// It is safe to call more than once; later calls return the first call's result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		var errs []error
		for index := len(c.Nodes) - 1; index >= 0; index-- {
			errs = append(errs, c.Nodes[index].shutdown(ctx))
		}
		// A start interrupted between pg_ctl's fork and the postmaster writing postmaster.pid
		// leaves a server no lock file names; find such stragglers by their command line.
		if killed, err := killProcessesMentioning(c.Dir); err != nil {
			errs = append(errs, err)
		} else if killed > 0 {
			c.run.logf("cluster: killed %d straggling process(es) under %s", killed, c.Dir)
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, newError(CodeSetup, "", "remove "+c.Dir, err))
		}
		c.stopWatchdog()
		c.closeErr = errors.Join(errs...)
		c.run.logf("cluster: closed %s", c.Dir)
	})
	return c.closeErr
}

// shutdown stops the node in immediate mode if it may be running, killing it if pg_ctl fails.
func (n *Node) shutdown(ctx context.Context) error {
	pid, err := n.PostmasterPID()
	if err != nil {
		return nil
	}
	if !n.isPostmaster(pid) {
		return n.removeStaleSharedMemory()
	}
	stopErr := n.stop(ctx, "immediate")
	if stopErr == nil {
		return nil
	}
	if killErr := n.Kill(); killErr != nil {
		return errors.Join(stopErr, killErr)
	}
	return nil
}

// killProcessesMentioning SIGKILLs every live process whose command line contains text (the
// cluster's unique directory) and waits until they are gone; it does nothing without /proc.
func killProcessesMentioning(text string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil
	}
	self := os.Getpid()
	var victims []int
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), text) || !processAlive(pid) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			victims = append(victims, pid)
		}
	}
	deadline := time.Now().Add(DefaultWaitTimeout)
	for _, pid := range victims {
		for processAlive(pid) {
			if time.Now().After(deadline) {
				return len(victims), newError(CodeTimeout, "", fmt.Sprintf("pid %d still alive after SIGKILL", pid), nil)
			}
			time.Sleep(pollInterval)
		}
	}
	return len(victims), nil
}

// ResetStatementStats clears pg_stat_statements on every node.
func (c *Cluster) ResetStatementStats(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := n.ResetStatementStats(ctx); err != nil {
			return fmt.Errorf("reset pg_stat_statements on %s: %w", n.Name, err)
		}
	}
	return nil
}

// StatementCalls returns, per node name, how many times the node executed
// statements whose text matches the LIKE pattern: the nodes' own evidence of
// where statements ran.
func (c *Cluster) StatementCalls(ctx context.Context, queryLike string) (map[string]int64, error) {
	out := make(map[string]int64, len(c.Nodes))
	for _, n := range c.Nodes {
		calls, err := n.StatementCalls(ctx, queryLike)
		if err != nil {
			return nil, fmt.Errorf("read pg_stat_statements on %s: %w", n.Name, err)
		}
		out[n.Name] = calls
	}
	return out, nil
}
