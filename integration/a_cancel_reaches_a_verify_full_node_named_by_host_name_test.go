package integration

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
)

// TestACancelReachesAVerifyFullNodeNamedByHostName: with tls.nodes verify-full and a node
// configured by its host name (its certificate names that host, as most do, not an IP address),
// a client's cancel request still cancels the statement running there: the connection that
// carries it is verified against the node's name, as the pool's connections are.
func TestACancelReachesAVerifyFullNodeNamedByHostName(t *testing.T) {
	c := ownCluster(t, 0)
	node := c.Nodes[0]
	ctx := timeoutCtx(t, 60*time.Second)
	ca := owltest.NewTestCA(t, "pgowl-test-nodes")
	server := ca.Issue(t, "node", "localhost", "localhost") // a DNS name only
	info, err := os.Stat(node.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	owner := info.Sys().(*syscall.Stat_t)
	for _, file := range []struct{ from, to string }{{server.CertFile, "server.crt"}, {server.KeyFile, "server.key"}} {
		data, err := os.ReadFile(file.from)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(node.DataDir, file.to)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, int(owner.Uid), int(owner.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sql := range []string{"ALTER SYSTEM SET ssl = on", "SELECT pg_reload_conf()"} {
		if err := node.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	dsn := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: "localhost:" + strconv.Itoa(node.Port), Path: "/postgres",
		RawQuery: url.Values{"sslmode": {"verify-full"}, "sslrootcert": {ca.CertFile}, "connect_timeout": {"5"}}.Encode()}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		conn, err := pgx.Connect(ctx, dsn.String())
		if err == nil {
			conn.Close(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not take TLS with its certificate for localhost: %v", err)
		}
	}

	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.TLS.Nodes = config.NodeTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.CertFile}
		cfg.Nodes[0].Host = "localhost"
	})
	conn := o.connect(t, nil)
	mustRun(t, conn.Conn, "over verify-full to localhost")
	go func() {
		time.Sleep(300 * time.Millisecond)
		conn.PgConn().CancelRequest(context.Background())
	}()
	started := time.Now()
	_, err = conn.Exec(ctx, "SELECT pg_sleep(8)")
	if pgErr, ok := asPgError(err); !ok || pgErr.Code != "57014" {
		t.Errorf("pg_sleep(8) with a cancel request after 300ms: %v after %s, want 57014 (cancelled)", err, time.Since(started).Round(time.Millisecond))
		t.Logf("pgowl's log:\n%s", o.logs.Tail(1500))
	}
}
