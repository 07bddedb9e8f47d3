package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/proxy"
)

// README: "/readyz | 200 when pgowl can route, else 503", and the Dockerfile's HEALTHCHECK and
// load balancers ask it. On SIGTERM pgowl "answers new connections with FATAL 57P01 pgowl is
// shutting down" while open transactions finish (up to shutdown_timeout, 30s by default), and the
// admin listener stays up through that drain. During it, a load balancer that asks /readyz must
// learn to stop sending clients: /readyz must not answer 200 while every new login is refused.
func TestReadinessTurnsFalseWhilePgowlRefusesNewClientsInItsDrain(t *testing.T) {
	c := sharedClusterFor(t)
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	for _, n := range c.Nodes {
		cfg.Nodes = append(cfg.Nodes, config.Node{Name: n.Name, Host: n.Host, Port: n.Port})
	}
	cfg.Users = []config.User{{Name: appUser, Password: appPassword, Auth: config.AuthSCRAM}}
	cfg.ShutdownTimeout = 20 * time.Second
	cfg.Monitor.Interval = 100 * time.Millisecond
	cfg.Admin.Listen = "127.0.0.1:0"
	ln, err := proxy.Listen(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = ln.Addr().String()
	inst, err := proxy.Build(cfg, zerolog.New(io.Discard))
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Run(runCtx, ln) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})
	o := &owl{addr: cfg.Listen, host: "127.0.0.1", port: ln.Addr().(*net.TCPAddr).Port, cfg: cfg, inst: inst, states: inst.Nodes(), nodes: c}
	o.waitRoles(t, initialRoles(c))

	readyz := func() (int, string) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + inst.AdminAddr().String() + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("before the shutdown /readyz = %d %s", code, body)
	}

	// A client with an open transaction keeps the drain going.
	ctx := timeoutCtx(t, time.Minute)
	busy := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	if _, err := busy.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := busy.Exec(ctx, "SELECT txid_current()"); err != nil {
		t.Fatal(err)
	}

	stop() // what SIGTERM does
	deadline := time.Now().Add(10 * time.Second)
	var loginErr error
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, o.dsn(appUser, appPassword, appDatabase, nil))
		cancel()
		if err != nil {
			loginErr = err
			break
		}
		conn.Close(ctx)
		time.Sleep(50 * time.Millisecond)
	}
	if loginErr == nil {
		t.Fatalf("new logins were still accepted 10s after the shutdown began")
	}
	wantSQLState(t, "a new login during the drain", loginErr, "57P01")
	code, body := readyz()
	if code == http.StatusOK {
		t.Errorf("during the drain every new login is refused (%v), yet /readyz answers %d %s: a load balancer keeps sending clients to this pgowl for up to shutdown_timeout", loginErr, code, body)
	}
	busy.Exec(ctx, "COMMIT")
}
