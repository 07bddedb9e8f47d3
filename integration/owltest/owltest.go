package owltest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/proxy"
)

// StopTimeout bounds how long a stopped instance may take to return from Run.
const StopTimeout = 15 * time.Second

// LogBuffer collects an instance's log (or a process's output); it is safe
// for concurrent use.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends to the log.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything logged so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail returns at most the last n bytes logged.
func (b *LogBuffer) Tail(n int) string { return TailString(b.String(), n) }

// TailString returns at most the last n bytes of s, marked when cut.
func TailString(s string, n int) string {
	if len(s) > n {
		return "...\n" + s[len(s)-n:]
	}
	return s
}

// Entries parses every log line; a line that is not a JSON object fails t.
func (b *LogBuffer) Entries(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	scanner := bufio.NewScanner(strings.NewReader(b.String()))
	scanner.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" {
			continue
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("log line is not a JSON object: %v: %s", err, line)
			continue
		}
		out = append(out, entry)
	}
	return out
}

// Instance is one pgowl running in the test process.
type Instance struct {
	*proxy.Instance
	Config config.Config
	Addr   *net.TCPAddr
	Logs   *LogBuffer
}

// Start builds and runs pgowl in front of c on a free loopback port (or on
// the address mutate puts in Listen), with user
// (SCRAM) as its one client login and a 100ms monitor interval, after mutate
// (which may be nil) has adjusted the configuration. It does not wait for
// the monitor. The instance stops when t ends; if t failed, the tail of its
// log is printed.
func Start(t testing.TB, c *cluster.Cluster, user, password string, mutate func(*config.Config)) *Instance {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0" // mutate may name another address; port 0 picks a free one
	for _, n := range c.Nodes {
		cfg.Nodes = append(cfg.Nodes, config.Node{Name: n.Name, Host: n.Host, Port: n.Port})
	}
	cfg.Users = []config.User{{Name: user, Password: password, Auth: config.AuthSCRAM}}
	// Within StopTimeout, for the transactions a test leaves open.
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Monitor.Interval = 100 * time.Millisecond
	cfg.Admin.Listen = "127.0.0.1:0" // a free port: tests run side by side; Instance.AdminAddr says which
	if mutate != nil {
		mutate(&cfg)
	}
	ln, err := proxy.Listen(context.Background(), cfg) // listen_reuse_port lets two instances share cfg.Listen
	if err != nil {
		t.Fatalf("listen on %s: %v", cfg.Listen, err)
	}
	cfg.Listen = ln.Addr().String()
	if err := cfg.Validate(); err != nil {
		ln.Close()
		t.Fatalf("pgowl configuration is invalid: %v", err)
	}
	logs := &LogBuffer{}
	logger := zerolog.New(logs).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	inst, err := proxy.Build(cfg, logger)
	if err != nil {
		ln.Close()
		t.Fatalf("proxy.Build: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("pgowl Run returned an error after shutdown: %v", err)
			}
		case <-time.After(StopTimeout):
			t.Errorf("pgowl Run did not return within %s of cancelling its context", StopTimeout)
		}
		if t.Failed() {
			t.Logf("pgowl log (tail):\n%s", logs.Tail(24<<10))
		}
	})
	return &Instance{Instance: inst, Config: cfg, Addr: ln.Addr().(*net.TCPAddr), Logs: logs}
}
