package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// pollInterval is how often waits re-check observed state.
const pollInterval = 20 * time.Millisecond

// harnessMarker tags the harness's own pg_stat_statements queries so StatementCalls can skip them.
const harnessMarker = "pgowl-harness"

// Node is one PostgreSQL server of a Cluster.
type Node struct {
	// Name is "pg1" for the initial primary and "pg2", "pg3", ... for the standbys.
	Name string
	// Host is the address the node listens on (always 127.0.0.1).
	Host string
	// Port is the node's TCP port.
	Port int
	// DataDir is the node's data directory.
	DataDir string
	// Dir is the node's directory; it holds DataDir, the server log and the Unix socket.
	Dir string

	run      *runner
	settings *sharedSettings
}

// sharedSettings are the postgresql.conf parameters every node of a cluster shares.
type sharedSettings struct {
	defaults  map[string]string
	overrides map[string]string
}

// LogPath returns the path of the node's server log.
func (n *Node) LogPath() string {
	return filepath.Join(n.Dir, "server.log")
}

// ServerLog returns the node's server log so far, for failure messages; if it cannot be
// read, a line saying why.
func (n *Node) ServerLog() string {
	content, err := os.ReadFile(n.LogPath())
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	return string(content)
}

// SocketDir returns the directory holding the node's Unix socket.
func (n *Node) SocketDir() string {
	return n.Dir
}

// Addr returns the node's host:port.
func (n *Node) Addr() string {
	return net.JoinHostPort(n.Host, strconv.Itoa(n.Port))
}

// DSN returns a postgres:// URL for user on database, with sslmode=disable.
// An empty password leaves the password out.
func (n *Node) DSN(user, password, database string) string {
	dsn := url.URL{
		Scheme:   "postgres",
		Host:     n.Addr(),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	if password == "" {
		dsn.User = url.User(user)
	} else {
		dsn.User = url.UserPassword(user, password)
	}
	return dsn.String()
}

// SuperuserDSN returns the DSN the harness itself uses: postgres on database postgres, no password.
func (n *Node) SuperuserDSN() string {
	return n.DSN(Superuser, "", "postgres")
}

// DatabaseDSN returns the superuser's DSN for database, with no password (the harness trusts
// the superuser over TCP).
func (n *Node) DatabaseDSN(database string) string {
	return n.DSN(Superuser, "", database)
}

// Connect opens a new connection to database postgres as the superuser over TCP.
func (n *Node) Connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, n.SuperuserDSN())
	if err != nil {
		return nil, newError(CodeQuery, n.Name, "connect as postgres to "+n.Addr(), err)
	}
	return conn, nil
}

// Exec runs sql with args as the superuser on a fresh connection; without args, sql may hold
// several statements.
func (n *Node) Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := n.Connect(ctx)
	if err != nil {
		return err
	}
	defer closeQuietly(conn)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return newError(CodeQuery, n.Name, "exec "+abbreviate(sql), err)
	}
	return nil
}

// QueryRow runs sql with args as the superuser on a fresh connection when the returned row is scanned.
func (n *Node) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &lazyRow{ctx: ctx, node: n, sql: sql, args: args}
}

// lazyRow connects, queries and scans in one step, then closes the connection.
type lazyRow struct {
	ctx  context.Context
	node *Node
	sql  string
	args []any
}

// Scan runs the query and scans its single row into dest.
func (r *lazyRow) Scan(dest ...any) error {
	conn, err := r.node.Connect(r.ctx)
	if err != nil {
		return err
	}
	defer closeQuietly(conn)
	if err := conn.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return newError(CodeQuery, r.node.Name, "query "+abbreviate(r.sql), err)
	}
	return nil
}

// InRecovery reports whether the node is a standby (pg_is_in_recovery()).
func (n *Node) InRecovery(ctx context.Context) (bool, error) {
	var inRecovery bool
	err := n.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery)
	return inRecovery, err
}

// ReplayLSN returns the last WAL position replayed by a standby (pg_last_wal_replay_lsn()).
func (n *Node) ReplayLSN(ctx context.Context) (string, error) {
	var lsn *string
	if err := n.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn()::text").Scan(&lsn); err != nil {
		return "", err
	}
	if lsn == nil {
		return "", newError(CodeState, n.Name, "pg_last_wal_replay_lsn() is NULL: the node never was a standby", nil)
	}
	return *lsn, nil
}

// CurrentLSN returns a primary's WAL position covering every transaction committed before the
// call. Nodes run with synchronous_commit=off, so a commit may still sit in WAL buffers, unsent
// to standbys. CurrentLSN therefore commits one tiny WAL-writing transaction (a transactional
// logical-decoding message, ignored by physical standbys) with synchronous_commit=on, which
// flushes all earlier WAL, and returns pg_current_wal_flush_lsn().
func (n *Node) CurrentLSN(ctx context.Context) (string, error) {
	conn, err := n.Connect(ctx)
	if err != nil {
		return "", err
	}
	defer closeQuietly(conn)
	statements := []string{
		"SET synchronous_commit = on",
		"SELECT /* " + harnessMarker + " */ pg_logical_emit_message(true, '" + harnessMarker + "', 'flush')",
	}
	for _, statement := range statements {
		if _, err := conn.Exec(ctx, statement); err != nil {
			return "", newError(CodeQuery, n.Name, "flush WAL: "+statement, err)
		}
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn()::text").Scan(&lsn); err != nil {
		return "", newError(CodeQuery, n.Name, "read pg_current_wal_flush_lsn()", err)
	}
	return lsn, nil
}

// WaitReplayed waits until the node has replayed WAL up to lsn; a primary counts its own WAL
// as replayed. The wait ends with CodeTimeout when ctx or DefaultWaitTimeout runs out.
func (n *Node) WaitReplayed(ctx context.Context, lsn string) error {
	target, err := ParseLSN(lsn)
	if err != nil {
		return newError(CodeInvalidOptions, n.Name, "wait for replay", err)
	}
	const positionSQL = "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text"
	observed := "nothing yet"
	return n.poll(ctx, "replay of "+lsn, func(conn *pgx.Conn) (bool, error) {
		var position *string
		if err := conn.QueryRow(ctx, positionSQL).Scan(&position); err != nil {
			return false, err
		}
		if position == nil {
			observed = "NULL"
			return false, nil
		}
		observed = *position
		reached, err := ParseLSN(*position)
		if err != nil {
			return false, err
		}
		return reached >= target, nil
	}, func() string { return "last replayed position " + observed })
}

// WaitCaughtUp waits until the node has replayed everything primary has written so far.
func (n *Node) WaitCaughtUp(ctx context.Context, primary *Node) error {
	lsn, err := primary.CurrentLSN(ctx)
	if err != nil {
		return err
	}
	return n.WaitReplayed(ctx, lsn)
}

// PauseReplay pauses WAL replay on a standby and waits until replay is actually paused.
func (n *Node) PauseReplay(ctx context.Context) error {
	if err := n.Exec(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		return err
	}
	state := "unknown"
	return n.poll(ctx, "replay pause", func(conn *pgx.Conn) (bool, error) {
		if err := conn.QueryRow(ctx, "SELECT pg_get_wal_replay_pause_state()").Scan(&state); err != nil {
			return false, err
		}
		return state == "paused", nil
	}, func() string { return "pause state " + state })
}

// ResumeReplay resumes WAL replay on a standby.
func (n *Node) ResumeReplay(ctx context.Context) error {
	return n.Exec(ctx, "SELECT pg_wal_replay_resume()")
}

// Promote turns a standby into a primary and waits until it leaves recovery.
func (n *Node) Promote(ctx context.Context) error {
	var promoted bool
	if err := n.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil {
		return err
	}
	if !promoted {
		return newError(CodeTimeout, n.Name, "pg_promote did not finish within 60 seconds", nil)
	}
	inRecovery := true
	return n.poll(ctx, "promotion", func(conn *pgx.Conn) (bool, error) {
		if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
			return false, err
		}
		return !inRecovery, nil
	}, func() string { return fmt.Sprintf("pg_is_in_recovery() = %t", inRecovery) })
}

// Rewire makes a standby stream from newPrimary (for example after a promotion): it creates
// the standby's slot on newPrimary, points primary_conninfo at it, reloads, and waits until
// the standby streams from newPrimary and has caught up with it. The standby must not have
// replayed past the point where newPrimary's new timeline forked, or it cannot follow and
// Rewire ends with CodeTimeout; promote the most advanced standby to avoid that.
func (n *Node) Rewire(ctx context.Context, newPrimary *Node) error {
	slot := slotName(n.Name)
	createSlot := "SELECT pg_create_physical_replication_slot($1::text, true) " +
		"WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1::text)"
	if err := newPrimary.Exec(ctx, createSlot, slot); err != nil {
		return err
	}
	conninfo := fmt.Sprintf("host=%s port=%d user=%s application_name=%s", newPrimary.Host, newPrimary.Port, Superuser, n.Name)
	statements := []string{
		"ALTER SYSTEM SET primary_conninfo = " + quoteLiteral(conninfo),
		"ALTER SYSTEM SET primary_slot_name = " + quoteLiteral(slot),
		"SELECT pg_reload_conf()",
	}
	for _, statement := range statements {
		if err := n.Exec(ctx, statement); err != nil {
			return err
		}
	}
	observed := "no WAL receiver"
	err := n.poll(ctx, "streaming from "+newPrimary.Name, func(conn *pgx.Conn) (bool, error) {
		var status string
		var senderPort *int32
		err := conn.QueryRow(ctx, "SELECT status, sender_port FROM pg_stat_wal_receiver").Scan(&status, &senderPort)
		if errors.Is(err, pgx.ErrNoRows) {
			observed = "no WAL receiver"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		observed = fmt.Sprintf("WAL receiver %s, sender port %v", status, derefOr(senderPort, 0))
		return status == "streaming" && senderPort != nil && int(*senderPort) == newPrimary.Port, nil
	}, func() string { return observed })
	if err != nil {
		return err
	}
	return n.WaitCaughtUp(ctx, newPrimary)
}

// StatementCalls sums pg_stat_statements.calls on this node for statements whose text matches
// the LIKE pattern queryLike; the harness's own statistics queries are not counted. The text is
// pg_stat_statements' normalised form, with constants replaced by $1, $2, ..., so match on
// identifiers or comments, not on literal values.
func (n *Node) StatementCalls(ctx context.Context, queryLike string) (int64, error) {
	sql := "SELECT /* " + harnessMarker + " */ coalesce(sum(calls), 0)::bigint FROM pg_stat_statements " +
		"WHERE query LIKE $1 AND query NOT LIKE '%" + harnessMarker + "%'"
	var calls int64
	err := n.QueryRow(ctx, sql, queryLike).Scan(&calls)
	return calls, err
}

// ResetStatementStats clears pg_stat_statements on this node.
func (n *Node) ResetStatementStats(ctx context.Context) error {
	return n.Exec(ctx, "SELECT /* "+harnessMarker+" */ pg_stat_statements_reset()")
}

// Start starts the node with pg_ctl and waits until it accepts connections.
func (n *Node) Start(ctx context.Context) error {
	if err := n.removeZombieLock(); err != nil {
		return err
	}
	_, err := n.run.run(ctx, n.Name, "pg_ctl", "start", "-w", "-t", "60", "-D", n.DataDir, "-l", n.LogPath())
	if err != nil {
		return n.withLog(err)
	}
	return nil
}

// Stop shuts the node down in fast mode and waits until it is gone.
func (n *Node) Stop(ctx context.Context) error {
	return n.stop(ctx, "fast")
}

// stop runs pg_ctl stop with the given shutdown mode.
func (n *Node) stop(ctx context.Context, mode string) error {
	_, err := n.run.run(ctx, n.Name, "pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", n.DataDir)
	if err != nil {
		return n.withLog(err)
	}
	return nil
}

// removeZombieLock removes postmaster.pid and the socket lock file when they name a killed
// postmaster that has not been reaped yet (a zombie, as under an init process that reaps
// slowly). PostgreSQL would take the zombie's pid for a live postmaster and refuse to start;
// a zombie holds no resources, so both locks are stale.
func (n *Node) removeZombieLock() error {
	pid, err := n.PostmasterPID()
	if err != nil {
		return nil // no lock file, or one PostgreSQL itself will judge
	}
	if _, state, ok := procStat(pid); !ok || state != 'Z' {
		return nil
	}
	n.run.logf("cluster: %s: postmaster %d is an unreaped zombie; removing its stale lock files", n.Name, pid)
	locks := []string{
		filepath.Join(n.DataDir, "postmaster.pid"),
		filepath.Join(n.SocketDir(), fmt.Sprintf(".s.PGSQL.%d.lock", n.Port)),
	}
	for _, lock := range locks {
		if err := os.Remove(lock); err != nil && !errors.Is(err, os.ErrNotExist) {
			return newError(CodeSetup, n.Name, "remove stale lock file", err)
		}
	}
	return nil
}

// removeStaleSharedMemory deletes the System V shared memory segment named in a stale
// postmaster.pid (left by Kill) once nothing is attached to it; PostgreSQL would reuse it on the
// next start, but a node that is never started again would leak it.
func (n *Node) removeStaleSharedMemory() error {
	content, err := os.ReadFile(filepath.Join(n.DataDir, "postmaster.pid"))
	if err != nil {
		return nil
	}
	lines := strings.Split(string(content), "\n")
	const sharedMemoryLine = 6 // "key id", the seventh line
	if len(lines) <= sharedMemoryLine {
		return nil
	}
	fields := strings.Fields(lines[sharedMemoryLine])
	if len(fields) != 2 {
		return nil
	}
	key, keyErr := strconv.ParseInt(fields[0], 10, 64)
	id, idErr := strconv.Atoi(fields[1])
	if keyErr != nil || idErr != nil {
		return nil
	}
	var segment unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &segment); err != nil {
		return nil // already gone
	}
	if int64(segment.Perm.Key) != key || segment.Nattch != 0 {
		return nil // reused by someone else, or still in use
	}
	if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil {
		return newError(CodeSetup, n.Name, fmt.Sprintf("remove stale shared memory segment %d", id), err)
	}
	n.run.logf("cluster: %s: removed stale shared memory segment %d", n.Name, id)
	return nil
}

// PostmasterPID returns the pid recorded in postmaster.pid, which exists while the node runs.
func (n *Node) PostmasterPID() (int, error) {
	content, err := os.ReadFile(filepath.Join(n.DataDir, "postmaster.pid"))
	if err != nil {
		return 0, newError(CodeState, n.Name, "read postmaster.pid (is the node running?)", err)
	}
	firstLine, _, _ := strings.Cut(string(content), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(firstLine))
	if err != nil || pid <= 0 {
		return 0, newError(CodeState, n.Name, fmt.Sprintf("postmaster.pid starts with %q, not a pid", firstLine), err)
	}
	return pid, nil
}

// ServerPIDs returns the node's processes: the postmaster, then its children (the backends and
// the server's own processes) as they are now. A backend started later is the postmaster's child
// too, and starts with the postmaster's CPU affinity and scheduling settings.
// It fails when postmaster.pid names no running postmaster of this node.
func (n *Node) ServerPIDs() ([]int, error) {
	pid, err := n.PostmasterPID()
	if err != nil {
		return nil, err
	}
	if !n.isPostmaster(pid) {
		return nil, newError(CodeState, n.Name, fmt.Sprintf("postmaster.pid names pid %d, which is not this node's running postmaster", pid), nil)
	}
	return append([]int{pid}, childPIDs(pid)...), nil
}

// Kill simulates a crash: it SIGKILLs the postmaster and its child processes and waits until
// they are gone. postmaster.pid stays behind, as after a real crash; Start recovers from it.
func (n *Node) Kill() error {
	victims, err := n.ServerPIDs()
	if err != nil {
		return err
	}
	pid := victims[0]
	for _, victim := range victims {
		if err := syscall.Kill(victim, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return newError(CodeState, n.Name, fmt.Sprintf("SIGKILL pid %d", victim), err)
		}
	}
	deadline := time.Now().Add(DefaultWaitTimeout)
	for _, victim := range victims {
		for processAlive(victim) {
			if time.Now().After(deadline) {
				return newError(CodeTimeout, n.Name, fmt.Sprintf("pid %d still alive after SIGKILL", victim), nil)
			}
			time.Sleep(pollInterval)
		}
	}
	n.run.logf("cluster: %s: killed postmaster %d and %d children", n.Name, pid, len(victims)-1)
	return nil
}

// isPostmaster reports whether pid is alive and, where /proc exists, runs with this node's
// data directory; it guards against signalling an unrelated process after pid reuse.
func (n *Node) isPostmaster(pid int) bool {
	if !processAlive(pid) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		_, statErr := os.Stat("/proc/self")
		return statErr != nil // no /proc at all: trust postmaster.pid
	}
	return strings.Contains(string(cmdline), n.DataDir)
}

// poll runs check on one superuser connection every pollInterval until it returns true,
// reconnecting after errors, bounded by ctx and DefaultWaitTimeout.
func (n *Node) poll(ctx context.Context, what string, check func(*pgx.Conn) (bool, error), observed func() string) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultWaitTimeout)
	defer cancel()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			closeQuietly(conn)
		}
	}()
	var lastErr error
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if conn == nil {
			conn, lastErr = n.Connect(ctx)
		}
		if conn != nil {
			done, err := check(conn)
			if err == nil && done {
				return nil
			}
			lastErr = err
			if err != nil {
				closeQuietly(conn)
				conn = nil
			}
		}
		select {
		case <-ctx.Done():
			reason := fmt.Sprintf("gave up waiting for %s (%s)", what, observed())
			return newError(CodeTimeout, n.Name, reason, errors.Join(ctx.Err(), lastErr))
		case <-ticker.C:
		}
	}
}

// withLog attaches the tail of the node's server log to a failure.
func (n *Node) withLog(err error) error {
	var clusterErr *Error
	if !errors.As(err, &clusterErr) {
		return err
	}
	if content, readErr := os.ReadFile(n.LogPath()); readErr == nil {
		clusterErr.Detail = tail(clusterErr.Detail + "\n--- " + n.LogPath() + " ---\n" + tail(string(content)))
	}
	return clusterErr
}

// writeConfig writes the node's pgowl.conf include file.
func (n *Node) writeConfig() error {
	content := renderSettings(n.settings.defaults, n.settings.overrides, nodeSettings{
		Name: n.Name, Port: n.Port, SocketDir: n.SocketDir(),
	})
	return n.run.writeFile(filepath.Join(n.DataDir, configIncludeName), content)
}

// configIncludeName is the file, inside each data directory, holding the harness's settings.
const configIncludeName = "pgowl.conf"

// slotName returns the physical replication slot name used for a standby.
func slotName(nodeName string) string {
	return "pgowl_" + nodeName
}

// ParseLSN parses a WAL position written as PostgreSQL prints it ("16/B374D848").
func ParseLSN(lsn string) (uint64, error) {
	high, low, found := strings.Cut(strings.TrimSpace(lsn), "/")
	if !found {
		return 0, fmt.Errorf("LSN %q has no '/'", lsn)
	}
	highValue, err := strconv.ParseUint(high, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: bad high part: %w", lsn, err)
	}
	lowValue, err := strconv.ParseUint(low, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: bad low part: %w", lsn, err)
	}
	return highValue<<32 | lowValue, nil
}

// childPIDs lists the processes whose parent is pid, from /proc; it is empty where /proc is missing.
func childPIDs(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var children []int
	for _, entry := range entries {
		candidate, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		if parent, _, ok := procStat(candidate); ok && parent == pid {
			children = append(children, candidate)
		}
	}
	return children
}

// procStat reads the parent pid and state letter of pid from /proc/<pid>/stat.
func procStat(pid int) (parent int, state byte, ok bool) {
	content, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command name is in parentheses and may contain spaces; fields follow the last ')'.
	closing := strings.LastIndexByte(string(content), ')')
	if closing < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(content[closing+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	parent, err = strconv.Atoi(fields[1])
	if err != nil {
		return 0, 0, false
	}
	return parent, fields[0][0], true
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		// ESRCH: gone. EPERM: the pid now belongs to another user, so ours is gone too.
		return false
	}
	if _, state, ok := procStat(pid); ok && (state == 'Z' || state == 'X') {
		return false
	}
	return true
}

// closeQuietly closes a connection, ignoring errors, within a short bound.
func closeQuietly(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// abbreviate shortens sql for error messages.
func abbreviate(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 120 {
		return sql[:117] + "..."
	}
	return sql
}

// derefOr returns *pointer, or fallback when pointer is nil.
func derefOr[T any](pointer *T, fallback T) T {
	if pointer == nil {
		return fallback
	}
	return *pointer
}
