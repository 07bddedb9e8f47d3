package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultBinDir is where Debian installs the PostgreSQL 15 server binaries.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// ErrUnavailable means the PostgreSQL binaries or the postgres user needed to start a cluster are missing.
var ErrUnavailable = errors.New("pgcluster: PostgreSQL binaries unavailable")

// Options configures Start.
type Options struct {
	// BinDir holds initdb, pg_ctl, postgres and pg_basebackup; empty means $PGOWL_PG_BINDIR or DefaultBinDir.
	BinDir string
	// Settings are extra postgresql.conf settings passed to the server with -c.
	Settings map[string]string
}

// Cluster is one running throw-away server.
type Cluster struct {
	// Dir is the cluster's own directory; it holds data/, the socket directory and the log.
	Dir string
	// Port is the TCP port on 127.0.0.1.
	Port int

	binDir   string
	settings map[string]string
	owner    *osUser
}

type osUser struct {
	name     string
	uid, gid int
}

// Start creates and starts a new cluster; call Stop to remove it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	cluster, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	if err := cluster.run(ctx, "initdb", "-D", cluster.dataDir(), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		cluster.removeDir()
		return nil, err
	}
	if err := cluster.startServer(ctx); err != nil {
		cluster.removeDir()
		return nil, err
	}
	return cluster, nil
}

// StartStandby makes a streaming hot standby of c with pg_basebackup and starts it.
func (c *Cluster) StartStandby(ctx context.Context) (*Cluster, error) {
	standby, err := prepare(Options{BinDir: c.binDir, Settings: c.settings})
	if err != nil {
		return nil, err
	}
	if err := standby.run(ctx, "pg_basebackup", "-D", standby.dataDir(), "-h", "127.0.0.1",
		"-p", strconv.Itoa(c.Port), "-U", "postgres", "-X", "stream", "-R", "--no-sync"); err != nil {
		standby.removeDir()
		return nil, err
	}
	if err := standby.startServer(ctx); err != nil {
		standby.removeDir()
		return nil, err
	}
	return standby, nil
}

// DSN returns a key/value connection string for database dbname as user postgres.
func (c *Cluster) DSN(dbname string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", c.Port, dbname)
}

// Stop shuts the server down and removes its directory.
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stopErr := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir(), "-m", "fast", "-w", "-t", "50")
	removeErr := c.removeDir()
	return errors.Join(stopErr, removeErr)
}

// Log returns the server log, for error messages.
func (c *Cluster) Log() string {
	data, err := os.ReadFile(c.logFile())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(data)
}

func prepare(opts Options) (*Cluster, error) {
	binDir := opts.BinDir
	if binDir == "" {
		binDir = os.Getenv("PGOWL_PG_BINDIR")
	}
	if binDir == "" {
		binDir = DefaultBinDir
	}
	for _, tool := range []string{"initdb", "pg_ctl", "postgres", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(binDir, tool)); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrUnavailable, err)
		}
	}
	owner, err := serverOwner()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgowl-classify-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: create directory: %w", err)
	}
	cluster := &Cluster{Dir: dir, binDir: binDir, settings: opts.Settings, owner: owner}
	if err := os.Mkdir(cluster.socketDir(), 0o700); err != nil {
		cluster.removeDir()
		return nil, fmt.Errorf("pgcluster: create socket directory: %w", err)
	}
	if owner != nil {
		for _, path := range []string{dir, cluster.socketDir()} {
			if err := os.Chown(path, owner.uid, owner.gid); err != nil {
				cluster.removeDir()
				return nil, fmt.Errorf("pgcluster: hand %s to %s: %w", path, owner.name, err)
			}
		}
	}
	return cluster, nil
}

// serverOwner returns the user to run the server as when we are root, or nil to run as ourselves.
func serverOwner() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	account, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root needs a postgres user: %s", ErrUnavailable, err)
	}
	uid, uidErr := strconv.Atoi(account.Uid)
	gid, gidErr := strconv.Atoi(account.Gid)
	if uidErr != nil || gidErr != nil {
		return nil, fmt.Errorf("%w: postgres user has non-numeric ids", ErrUnavailable)
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		return nil, fmt.Errorf("%w: runuser not found: %s", ErrUnavailable, err)
	}
	return &osUser{name: account.Username, uid: uid, gid: gid}, nil
}

func (c *Cluster) dataDir() string   { return filepath.Join(c.Dir, "data") }
func (c *Cluster) socketDir() string { return filepath.Join(c.Dir, "sock") }
func (c *Cluster) logFile() string   { return filepath.Join(c.Dir, "server.log") }

func (c *Cluster) removeDir() error {
	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("pgcluster: remove %s: %w", c.Dir, err)
	}
	return nil
}

// startServer picks a free port and starts the server, retrying if another process took the port.
func (c *Cluster) startServer(ctx context.Context) error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.Port = port
		serverOptions := []string{
			"-p " + strconv.Itoa(port),
			"-c listen_addresses=127.0.0.1",
			"-c unix_socket_directories=" + c.socketDir(),
			"-c fsync=off",
		}
		for name, value := range c.settings {
			serverOptions = append(serverOptions, "-c "+name+"="+value)
		}
		lastErr = c.run(ctx, "pg_ctl", "start", "-D", c.dataDir(), "-l", c.logFile(), "-w", "-t", "60",
			"-o", strings.Join(serverOptions, " "))
		if lastErr == nil {
			return nil
		}
	}
	return fmt.Errorf("%w\nserver log:\n%s", lastErr, c.Log())
}

func freePort() (int, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: find a free port: %w", err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port, nil
}

// run executes one PostgreSQL tool, as the postgres user when we are root.
func (c *Cluster) run(ctx context.Context, tool string, args ...string) error {
	path := filepath.Join(c.binDir, tool)
	var cmd *exec.Cmd
	if c.owner != nil {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.owner.name, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.Dir
	output, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: %s %s: %w\n%s", tool, strings.Join(args, " "), err, output)
	}
	return nil
}
