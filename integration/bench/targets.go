package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/internal/cluster"
)

// readyTimeout bounds how long a proxy may take to accept a login and answer SELECT 1.
const readyTimeout = 45 * time.Second

// Target names, in the order every round runs them and the report lists them.
const (
	targetDirect      = "direct"
	targetPgBouncer   = "pgbouncer"
	targetPgpool      = "pgpool"
	targetPgowl       = "pgowl"
	targetPgowlNotice = "pgowl+notice"
	// targetPgowlAdmin is pgowl with its admin listener on and scraped
	// every second (pgowl runs with it off); run only when asked for.
	targetPgowlAdmin = "pgowl+admin"
	// targetForward is integration/bench/forward, a byte forwarder: the floor
	// of what any proxy costs on this machine. Run only when asked for.
	targetForward = "forward"
)

// targetOrder lists every target name in run and report order.
var targetOrder = append([]string{targetDirect, targetForward, targetPgBouncer, targetPgpool, targetPgowl, targetPgowlNotice, targetPgowlAdmin, targetPgowlRYWOff}, guardTargets...)

// defaultTargets are the targets run without -targets.
var defaultTargets = []string{targetDirect, targetPgBouncer, targetPgpool, targetPgowl, targetPgowlNotice}

// pgbouncerPoolSize is PgBouncer's default_pool_size: one server connection per client of the
// largest workload, so the pool never makes a client wait.
const pgbouncerPoolSize = 64

// pgpoolChildren is pgpool-II's num_init_children: more than the largest workload's clients.
const pgpoolChildren = 100

// pgpoolDelayThreshold is pgpool-II's delay_threshold in bytes of WAL (pgpool 4.3 has no time-based limit).
const pgpoolDelayThreshold = 10000000

// pgowlPoolPerNode is pgowl's pool.max_per_node: pgowl holds a backend per client session
// today, and least_lag routing may send all 64 clients to one standby.
const pgowlPoolPerNode = 100

// target is one way of reaching the cluster that pgbench runs against.
type target struct {
	// name is one of targetOrder.
	name string
	host string
	port int
	// proc is the proxy process; nil for the direct target.
	proc *daemon
	// skipped says why the target is not benchmarked, or is empty.
	skipped string
	// setup describes the target's configuration for the report.
	setup string
	// launch starts the proxy process and waits until it answers; nil for the direct target.
	launch func(ctx context.Context) error
	// exits describes each time the proxy process ended during the benchmark.
	exits []string
	// peakRSS is the largest VmHWM (KiB) seen for the proxy's main process.
	peakRSS int64
}

// label is the target's name as the report prints it.
func (t *target) label() string {
	switch t.name {
	case targetDirect:
		return "direct (primary)"
	case targetPgBouncer:
		return "PgBouncer"
	case targetPgpool:
		return "pgpool-II"
	case targetForward:
		return "byte forwarder"
	}
	return t.name
}

// stop stops the target's proxy process, if any.
func (t *target) stop() {
	if t.proc != nil {
		t.proc.stop()
	}
}

// noteExit returns a description of the proxy's exit if its process has ended since it was
// launched, recording it in exits the first time; "" while it runs.
func (t *target) noteExit() string {
	if t.proc == nil || !t.proc.exited() {
		return ""
	}
	if t.proc.exitNote == "" {
		t.proc.exitNote = fmt.Sprintf("%s (pid %d) exited at %s: %s", t.label(), t.proc.pid(),
			time.Now().Format(time.TimeOnly), describeExit(t.proc.waitErr))
		if tail := strings.TrimSpace(t.proc.logTail(5)); tail != "" {
			t.proc.exitNote += "; last log lines: " + tail
		} else {
			t.proc.exitNote += "; its log is empty"
		}
		t.exits = append(t.exits, t.proc.exitNote)
	}
	return t.proc.exitNote
}

// describeExit explains a proxy's exit status.
func describeExit(err error) string {
	if err == nil {
		return "exit status 0, a clean shutdown: pgowl, PgBouncer and pgpool-II only do that on SIGTERM or SIGINT, which the benchmark had not sent"
	}
	return err.Error()
}

// sampleRSS updates peakRSS from the running proxy's VmHWM.
func (t *target) sampleRSS() {
	if t.proc != nil && !t.proc.exited() {
		t.peakRSS = max(t.peakRSS, peakRSS(t.proc.pid()))
	}
}

// lab is what the proxies share: where they live, who runs them and what they front.
type lab struct {
	dir      string
	owner    *syscall.Credential
	cluster  *cluster.Cluster
	user     string
	password string
}

// subdir creates a directory for one proxy inside the lab directory.
func (l *lab) subdir(name string) (string, error) {
	dir := filepath.Join(l.dir, name)
	return dir, os.MkdirAll(dir, 0o755)
}

// daemonEnv is the environment of a proxy process: ours, without libpq variables, HOME in dir.
func daemonEnv(dir string) []string {
	var env []string
	for _, entry := range os.Environ() {
		if strings.HasPrefix(entry, "PG") || strings.HasPrefix(entry, "HOME=") {
			continue
		}
		env = append(env, entry)
	}
	return append(env, "HOME="+dir)
}

// newProxyTarget begins a proxy target called name: its own directory in the lab, and count
// free loopback ports, the first of which is where clients connect. fail marks the target
// skipped ("<what> did not start: <err>"), stopping whatever was launched, and returns it.
func (l *lab) newProxyTarget(name, what string, count int) (t *target, dir string, ports []int, fail func(error) *target, err error) {
	t = &target{name: name, host: "127.0.0.1"}
	fail = func(err error) *target {
		t.stop()
		t.skipped = what + " did not start: " + err.Error()
		return t
	}
	if dir, err = l.subdir(strings.ReplaceAll(name, "+", "-")); err != nil {
		return t, "", nil, fail, err
	}
	if ports, err = freePorts(count); err != nil {
		return t, "", nil, fail, err
	}
	t.port = ports[0]
	return t, dir, ports, fail, nil
}

// startPgBouncer writes a PgBouncer configuration (transaction pooling in front of the
// primary, SCRAM with the user's password in auth_file) and starts it in the foreground.
func (l *lab) startPgBouncer(ctx context.Context, binary string) *target {
	t, dir, _, fail, err := l.newProxyTarget(targetPgBouncer, "PgBouncer", 1)
	if err != nil {
		return fail(err)
	}
	primary := l.cluster.Nodes[0]
	userlistPath := filepath.Join(dir, "userlist.txt")
	conf := fmt.Sprintf(`[databases]
%[1]s = host=%[2]s port=%[3]d dbname=%[1]s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %[4]d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %[5]s
pool_mode = transaction
default_pool_size = %[6]d
max_client_conn = 300
max_db_connections = 0
server_idle_timeout = 600
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
log_pooler_errors = 1
pidfile = %[7]s
`, benchDatabase, primary.Host, primary.Port, t.port, userlistPath, pgbouncerPoolSize, filepath.Join(dir, "pgbouncer.pid"))
	userlist := fmt.Sprintf("%q %q\n", l.user, l.password)
	confPath := filepath.Join(dir, "pgbouncer.ini")
	if err := writeFiles(map[string]string{confPath: conf, userlistPath: userlist}); err != nil {
		return fail(err)
	}
	// The auth file holds a clear-text password: readable by its owner only.
	if err := os.Chmod(userlistPath, 0o600); err != nil {
		return fail(err)
	}
	if err := chownTree(dir, l.owner); err != nil {
		return fail(err)
	}
	t.launch = l.launcher(t, dir, "pgbouncer.log", l.owner, binary, confPath)
	if err := t.launch(ctx); err != nil {
		return fail(err)
	}
	t.setup = fmt.Sprintf("pool_mode = transaction, default_pool_size = %d, max_client_conn = 300, auth_type = scram-sha-256, in front of the primary only", pgbouncerPoolSize)
	return t
}

// startPgpool writes a pgpool-II 4.3 configuration (streaming-replication mode, load balancing
// over all three nodes with delay_threshold, no health checks, no failover) and starts it with -n.
func (l *lab) startPgpool(ctx context.Context, binary string) *target {
	t, dir, ports, fail, err := l.newProxyTarget(targetPgpool, "pgpool-II", 2)
	if err != nil {
		return fail(err)
	}
	var backends strings.Builder
	for i, node := range l.cluster.Nodes {
		fmt.Fprintf(&backends, "backend_hostname%d = '%s'\nbackend_port%d = %d\nbackend_weight%d = 1\nbackend_flag%d = 'DISALLOW_TO_FAILOVER'\nbackend_application_name%d = '%s'\n",
			i, node.Host, i, node.Port, i, i, i, node.Name)
	}
	conf := fmt.Sprintf(`# Written by pgowl's integration/bench.
backend_clustering_mode = 'streaming_replication'
listen_addresses = '127.0.0.1'
port = %d
socket_dir = '%[3]s'
pcp_listen_addresses = '127.0.0.1'
pcp_port = %[2]d
pcp_socket_dir = '%[3]s'
wd_ipc_socket_dir = '%[3]s'
use_watchdog = off
pid_file_name = '%[3]s/pgpool.pid'
logdir = '%[3]s'
log_destination = 'stderr'
logging_collector = off
log_min_messages = warning
log_connections = off
log_statement = off
log_per_node_statement = off
%[4]s
enable_pool_hba = off
pool_passwd = '%[3]s/pool_passwd'
allow_clear_text_frontend_auth = off
num_init_children = %[5]d
max_pool = 1
reserved_connections = 0
child_life_time = 0
child_max_connections = 0
connection_life_time = 0
client_idle_limit = 0
connection_cache = on
load_balance_mode = on
statement_level_load_balance = off
sr_check_period = 1
sr_check_user = 'postgres'
sr_check_password = ''
sr_check_database = 'postgres'
delay_threshold = %[6]d
health_check_period = 0
failover_on_backend_error = off
failover_command = ''
memory_cache_enabled = off
`, t.port, ports[1], dir, backends.String(), pgpoolChildren, pgpoolDelayThreshold)
	confPath := filepath.Join(dir, "pgpool.conf")
	passwdPath := filepath.Join(dir, "pool_passwd")
	files := map[string]string{
		confPath:                            conf,
		filepath.Join(dir, "pcp.conf"):      "",
		filepath.Join(dir, "pool_hba.conf"): "host all all 127.0.0.1/32 trust\n",
		passwdPath:                          l.user + ":TEXT" + l.password + "\n",
	}
	if err := writeFiles(files); err != nil {
		return fail(err)
	}
	// pool_passwd holds a clear-text password: readable by its owner only.
	if err := os.Chmod(passwdPath, 0o600); err != nil {
		return fail(err)
	}
	if err := chownTree(dir, l.owner); err != nil {
		return fail(err)
	}
	t.launch = l.launcher(t, dir, "pgpool.log", l.owner,
		binary, "-n", "-D", "-f", confPath, "-F", filepath.Join(dir, "pcp.conf"), "-a", filepath.Join(dir, "pool_hba.conf"))
	if err := t.launch(ctx); err != nil {
		return fail(err)
	}
	t.setup = fmt.Sprintf("streaming_replication mode, load_balance_mode = on over the 3 nodes (weight 1 each, primary included), "+
		"delay_threshold = %d bytes, sr_check_period = 1s, num_init_children = %d, max_pool = 1, health checks off", pgpoolDelayThreshold, pgpoolChildren)
	return t
}

// startPgowl writes a pgowl configuration for the three nodes and starts `pgowl serve`.
// With admin, the admin listener is on and scraped every second until ctx ends; without, it is
// off (admin.listen "").
func (l *lab) startPgowl(ctx context.Context, binary, name string) *target {
	extra, extraSetup := "", ""
	if name == targetPgowlGuard || name == targetPgowlGuardCache {
		extra, extraSetup = guardConfig(name, benchUser)
	}
	return l.startPgowlNamed(ctx, binary, name, name == targetPgowlNotice, name == targetPgowlAdmin, extra, extraSetup)
}

// startPgowlNamed starts pgowl as target name, with extra appended to its configuration file
// and extraSetup to its description.
func (l *lab) startPgowlNamed(ctx context.Context, binary, name string, notice, admin bool, extra, extraSetup string) *target {
	t, dir, ports, fail, err := l.newProxyTarget(name, name, 2)
	if err != nil {
		return fail(err)
	}
	adminListen := `""`
	if admin {
		adminListen = fmt.Sprintf("127.0.0.1:%d", ports[1])
	}
	var nodes strings.Builder
	for _, node := range l.cluster.Nodes {
		fmt.Fprintf(&nodes, "  - {name: %s, host: %s, port: %d}\n", node.Name, node.Host, node.Port)
	}
	conf := fmt.Sprintf(`# Written by pgowl's integration/bench.
listen: 127.0.0.1:%d
nodes:
%susers:
  - {name: %s, password: %q}
monitor: {user: postgres, password: "", database: postgres}
routing:
  notice: %t
%slog:
  level: warn
  format: json
pool:
  max_per_node: %d
admin:
  listen: %s
%s`, t.port, nodes.String(), l.user, l.password, notice, readYourWritesKeys(name), pgowlPoolPerNode, adminListen, extra)
	confPath := filepath.Join(dir, "pgowl.yaml")
	if err := writeFiles(map[string]string{confPath: conf}); err != nil {
		return fail(err)
	}
	t.launch = l.launcher(t, dir, "pgowl.log", nil, binary, "serve", "--config", confPath)
	if err := t.launch(ctx); err != nil {
		return fail(err)
	}
	t.setup = fmt.Sprintf("routing.notice: %t, log.level: warn, pool.max_per_node: %d, other keys default (max_replica_lag 5s, standby_choice least_lag)",
		notice, pgowlPoolPerNode) + extraSetup
	if keys := readYourWritesKeys(name); keys != "" {
		t.setup += ", routing." + strings.TrimSpace(keys)
	}
	if admin {
		go scrapeEverySecond(ctx, "http://"+adminListen+"/metrics")
		t.setup += "; admin.listen on, /metrics scraped every second"
	} else {
		t.setup += `; admin.listen: "" (no listener, no metrics or history)`
	}
	return t
}

// scrapeEverySecond fetches url once a second until ctx ends, as Prometheus would.
func scrapeEverySecond(ctx context.Context, url string) {
	client := http.Client{Timeout: 900 * time.Millisecond}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if resp, err := client.Get(url); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

// launcher returns t's launch function: start argv in dir as owner, logging to logName there
// (appending, so the log of an earlier launch stays), then wait until it answers.
func (l *lab) launcher(t *target, dir, logName string, owner *syscall.Credential, argv ...string) func(context.Context) error {
	return func(ctx context.Context) error {
		proc, err := startDaemon(t.name, dir, filepath.Join(dir, logName), owner, daemonEnv(dir), argv...)
		if err != nil {
			return err
		}
		t.proc = proc
		return l.waitReady(ctx, t)
	}
}

// writeFiles writes each file with mode 0644.
func writeFiles(files map[string]string) error {
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// dsn returns a URL logging in as the benchmark user through t.
func (l *lab) dsn(t *target) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(l.user, l.password),
		Host:     net.JoinHostPort(t.host, strconv.Itoa(t.port)),
		Path:     "/" + benchDatabase,
		RawQuery: "sslmode=disable&connect_timeout=5",
	}
	return u.String()
}

// waitReady waits until a login through t answers SELECT 1 over the simple protocol.
func (l *lab) waitReady(ctx context.Context, t *target) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		if t.proc != nil && t.proc.exited() {
			return fmt.Errorf("exited (%v): %s", t.proc.waitErr, t.proc.logTail(8))
		}
		last = l.query(ctx, t, "SELECT 1", nil)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			tail := ""
			if t.proc != nil {
				tail = "; log: " + t.proc.logTail(8)
			}
			return fmt.Errorf("no answer within %s: %v%s", readyTimeout, last, tail)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// query runs sql through t on a fresh connection over the simple protocol and passes each row's
// values, as text, to row (which may be nil).
func (l *lab) query(ctx context.Context, t *target, sql string, row func([]string)) error {
	cfg, err := pgx.ParseConfig(l.dsn(t))
	if err != nil {
		return err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			return err
		}
		if row != nil {
			text := make([]string, len(values))
			for i, v := range values {
				text[i] = fmt.Sprint(v)
			}
			row(text)
		}
	}
	return rows.Err()
}

// buildCommand compiles the module's package pkg (such as ./cmd/pgowl) into dir/bin. With
// fromHead it builds the module's committed HEAD, exported with git archive into dir/src (once),
// so that uncommitted work of others in the same checkout is not measured; otherwise it builds
// the working tree in moduleDir.
func buildCommand(ctx context.Context, moduleDir, dir, pkg string, fromHead bool) (string, error) {
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	binary := filepath.Join(binDir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	source := moduleDir
	if fromHead {
		source = filepath.Join(dir, "src")
		if !fileExists(filepath.Join(source, "go.mod")) {
			if err := os.MkdirAll(source, 0o755); err != nil {
				return "", err
			}
			archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive HEAD | tar -x -C "$2"`, "export", moduleDir, source)
			if out, err := archive.CombinedOutput(); err != nil {
				return "", fmt.Errorf("export HEAD with git archive: %w\n%s", err, out)
			}
		}
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binary, pkg)
	cmd.Dir = source
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s in %s: %w\n%s", pkg, source, err, out)
	}
	return binary, nil
}

// startForward starts the byte forwarder in front of the primary.
func (l *lab) startForward(ctx context.Context, binary string) *target {
	t, dir, _, fail, err := l.newProxyTarget(targetForward, "the byte forwarder", 1)
	if err != nil {
		return fail(err)
	}
	primary := l.cluster.Nodes[0]
	t.setup = "integration/bench/forward: one connection to the primary per client, bytes copied both ways, nothing parsed, pooled or routed"
	t.launch = l.launcher(t, dir, "forward.log", nil, binary,
		net.JoinHostPort(t.host, strconv.Itoa(t.port)), net.JoinHostPort(primary.Host, strconv.Itoa(primary.Port)))
	if err := t.launch(ctx); err != nil {
		return fail(err)
	}
	return t
}
