package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgowl/pgowl/config"
)

// pgbouncerStartTimeout bounds the wait for PgBouncer to accept connections.
const pgbouncerStartTimeout = 15 * time.Second

// startPgBouncer runs PgBouncer in front of primary, as the anchor that relays and does nothing
// else: session pooling (the leanest relay it has: the client keeps one server connection, and
// a SET holds), SCRAM with benchUser's password, logging off. PgBouncer refuses to run as root,
// so a root benchmark runs it as the postgres user. The binary is pgbouncer from PATH or
// /usr/sbin (Debian's package).
func startPgBouncer(ctx context.Context, primary config.Node) (addr string, pid int, stop func(), err error) {
	binary, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/pgbouncer"); statErr != nil {
			return "", 0, nil, fmt.Errorf("-pgbouncer: no pgbouncer in PATH or /usr/sbin (Debian: apt-get install pgbouncer)")
		}
		binary = "/usr/sbin/pgbouncer"
	}
	dir, err := os.MkdirTemp("", "migrationbench-pgbouncer-")
	if err != nil {
		return "", 0, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return "", 0, nil, err
	}
	addr = ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	userlist := filepath.Join(dir, "userlist.txt")
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %s
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
pool_mode = session
max_client_conn = 20
default_pool_size = 4
ignore_startup_parameters = extra_float_digits,search_path
log_connections = 0
log_disconnections = 0
log_pooler_errors = 1
`, primary.Host, primary.Port, port, userlist)
	confPath := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		cleanup()
		return "", 0, nil, err
	}
	// The auth file holds the password in clear: readable by its owner only.
	if err := os.WriteFile(userlist, []byte(fmt.Sprintf("%q %q\n", benchUser, benchPassword)), 0o600); err != nil {
		cleanup()
		return "", 0, nil, err
	}
	cmd := exec.Command(binary, confPath)
	var output strings.Builder
	cmd.Stdout, cmd.Stderr = &output, &output
	if os.Geteuid() == 0 {
		owner, err := user.Lookup("postgres")
		if err != nil {
			cleanup()
			return "", 0, nil, fmt.Errorf("-pgbouncer runs PgBouncer as the postgres user when run as root: %w", err)
		}
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		for _, path := range []string{dir, confPath, userlist} {
			if err := os.Chown(path, uid, gid); err != nil {
				cleanup()
				return "", 0, nil, err
			}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	if err := cmd.Start(); err != nil {
		cleanup()
		return "", 0, nil, err
	}
	exited := waitInBackground(cmd)
	stop = func() {
		terminate(cmd, exited, 10*time.Second)
		cleanup()
	}
	deadline := time.Now().Add(pgbouncerStartTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return addr, cmd.Process.Pid, stop, nil
		}
		select {
		case <-exited:
			cleanup()
			return "", 0, nil, fmt.Errorf("pgbouncer exited at start: %s", strings.TrimSpace(output.String()))
		case <-ctx.Done():
			stop()
			return "", 0, nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", 0, nil, fmt.Errorf("pgbouncer did not accept connections within %s: %s", pgbouncerStartTimeout, strings.TrimSpace(output.String()))
		}
	}
}
