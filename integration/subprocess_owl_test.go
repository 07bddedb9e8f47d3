package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// builtPgowl is the pgowl binary built from this tree, once per test binary.
var builtPgowl struct {
	once sync.Once
	path string
	err  error
	dir  string
}

// pgowlBinary builds cmd/pgowl from the tree (once) and returns its path.
func pgowlBinary(t *testing.T) string {
	t.Helper()
	builtPgowl.once.Do(func() {
		dir, err := os.MkdirTemp("", "pgowl-bin-")
		if err != nil {
			builtPgowl.err = err
			return
		}
		builtPgowl.dir = dir
		builtPgowl.path = filepath.Join(dir, "pgowl")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", builtPgowl.path, "../cmd/pgowl").CombinedOutput()
		if err != nil {
			builtPgowl.err = fmt.Errorf("go build ../cmd/pgowl: %v\n%s", err, out)
		}
	})
	if builtPgowl.err != nil {
		t.Fatal(builtPgowl.err)
	}
	return builtPgowl.path
}

// processOwl is pgowl running as a child process, configured by a YAML file.
type processOwl struct {
	cmd        *exec.Cmd
	configPath string
	port       int
	log        *syncbuf.Buffer
	exited     chan struct{}
	exitCode   int
}

// owlYAML renders a configuration for the nodes of c named in nodes, with
// the app login using password, and extra YAML appended.
func owlYAML(c *cluster.Cluster, port int, nodes []string, password, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:%d\nnodes:\n", port)
	for _, name := range nodes {
		n := c.Node(name)
		fmt.Fprintf(&b, "  - {name: %s, host: %s, port: %d}\n", n.Name, n.Host, n.Port)
	}
	fmt.Fprintf(&b, "users:\n  - {name: %s, password: %q}\n", appUser, password)
	fmt.Fprintf(&b, "monitor: {user: %s, interval: 100ms}\nadmin: {users: [%s], listen: \"\"}\n", cluster.Superuser, appUser)
	b.WriteString(extra)
	return b.String()
}

// freePort returns a loopback port free at the time of the call, from below the ephemeral range
// (see freeLoopbackPorts).
func freePort(t *testing.T) int {
	t.Helper()
	return freeLoopbackPorts(t, 1)[0]
}

// startProcessOwl writes yaml to a file and runs pgowl serve with it; it
// returns once the port accepts connections. The process is killed when t
// ends if it still runs.
func startProcessOwl(t *testing.T, port int, yaml string) *processOwl {
	t.Helper()
	bin := pgowlBinary(t)
	path := filepath.Join(t.TempDir(), "pgowl.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &processOwl{configPath: path, port: port, log: &syncbuf.Buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "serve", "--config", path)
	p.cmd.Env = owltest.CleanEnv()
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("pgowl log (tail):\n%s", tailOf(p.log.String(), 16<<10))
		}
	})
	deadline := time.Now().Add(proxyReadyTimeout)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case <-p.exited:
			t.Fatalf("pgowl exited with %d before listening\n%s", p.exitCode, p.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgowl did not listen on %d within %s\n%s", port, proxyReadyTimeout, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// rewrite replaces the configuration file.
func (p *processOwl) rewrite(t *testing.T, yaml string) {
	t.Helper()
	if err := os.WriteFile(p.configPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (p *processOwl) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits up to timeout for the process to exit and returns its exit code.
func (p *processOwl) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.exitCode
	case <-time.After(timeout):
		t.Fatalf("pgowl did not exit within %s", timeout)
		return -1
	}
}

// waitLog waits up to timeout for a log line containing text.
func (p *processOwl) waitLog(t *testing.T, timeout time.Duration, text string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, line := range strings.Split(p.log.String(), "\n") {
			if strings.Contains(line, text) {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within %s", text, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// env points libpq programs at the process as the app user with password.
func (p *processOwl) env(password string) []string {
	return []string{
		"PGHOST=127.0.0.1", "PGPORT=" + strconv.Itoa(p.port), "PGUSER=" + appUser, "PGPASSWORD=" + password,
		"PGDATABASE=" + appDatabase, "PGCONNECT_TIMEOUT=10", "PGSSLMODE=disable", "PSQLRC=/dev/null",
	}
}

// dsn is a pgx connection string for the process.
func (p *processOwl) dsn(password, database string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=10", appUser, password, p.port, database)
}
