package integration

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/internal/cluster"
)

// requireNodeTLS turns TLS on for node with the given server certificate and replaces its
// pg_hba.conf with hostssl lines only, so that the node refuses every connection without TLS.
// It returns the superuser DSN that reaches the node afterwards (verify-ca against caFile).
func requireNodeTLS(t *testing.T, node *cluster.Node, server owltest.CertPair, caFile string) string {
	return configureNodeTLS(t, node, server, caFile, nil)
}

// configureNodeTLS is requireNodeTLS; with client set, the node also wants a client certificate
// signed by caFile on every connection (clientcert=verify-ca), and the returned DSN presents client.
func configureNodeTLS(t *testing.T, node *cluster.Node, server owltest.CertPair, caFile string, client *owltest.CertPair) string {
	t.Helper()
	ctx := timeoutCtx(t, 30*time.Second)
	info, err := os.Stat(node.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	owner := info.Sys().(*syscall.Stat_t)
	for _, file := range []struct{ from, to string }{{server.CertFile, "server.crt"}, {server.KeyFile, "server.key"}, {caFile, "root.crt"}} {
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
	clientCert := ""
	if client != nil {
		clientCert = " clientcert=verify-ca"
	}
	hba := strings.Join([]string{
		"# Written by the node TLS test: TLS or nothing over TCP.",
		"local    all  all                    trust",
		"hostssl  all  postgres  127.0.0.1/32 trust" + clientCert,
		"hostssl  all  all       127.0.0.1/32 scram-sha-256" + clientCert,
	}, "\n") + "\n"
	hbaPath := filepath.Join(node.DataDir, "pg_hba.conf")
	if err := os.WriteFile(hbaPath, []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(hbaPath, int(owner.Uid), int(owner.Gid))
	// verify-ca: the node's certificate may name its host only, not the address dialled here.
	params := url.Values{"sslmode": {"verify-ca"}, "sslrootcert": {caFile}, "connect_timeout": {"5"}}
	if client != nil {
		params.Set("sslcert", client.CertFile)
		params.Set("sslkey", client.KeyFile)
	}
	dsn := url.URL{Scheme: "postgres", User: url.User(cluster.Superuser), Host: node.Addr(), Path: "/postgres", RawQuery: params.Encode()}
	withoutClientCert := url.URL{Scheme: "postgres", User: url.User(cluster.Superuser), Host: node.Addr(), Path: "/postgres",
		RawQuery: url.Values{"sslmode": {"verify-ca"}, "sslrootcert": {caFile}, "connect_timeout": {"5"}}.Encode()}
	reload := []string{"ALTER SYSTEM SET ssl = on", "ALTER SYSTEM SET ssl_ca_file = 'root.crt'", "SELECT pg_reload_conf()"}
	if conn, err := pgx.Connect(ctx, withoutClientCert.String()); err == nil {
		// Already TLS only (an earlier call): the plain helpers cannot reach the node any more.
		for _, sql := range reload {
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close(ctx)
	} else {
		for _, sql := range reload {
			if err := node.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The reload is asynchronous: wait until a plain connection is refused and a TLS one works
	// (and, with client certificates, one without a certificate is refused).
	deadline := time.Now().Add(20 * time.Second)
	for {
		plainErr := node.Exec(ctx, "SELECT 1")
		if client != nil && plainErr != nil {
			if conn, err := pgx.Connect(ctx, withoutClientCert.String()); err == nil {
				conn.Close(ctx)
				plainErr = nil // not yet refused
			}
		}
		conn, tlsErr := pgx.Connect(ctx, dsn.String())
		if tlsErr == nil {
			conn.Close(ctx)
		}
		if plainErr != nil && tlsErr == nil {
			return dsn.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not switch to TLS only: plain (or certificate-less) connection error %v, TLS connection error %v", node.Name, plainErr, tlsErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNodeTLSVerifyFull reaches a node that accepts TLS only (ssl = on, hostssl-only pg_hba.conf)
// with tls.nodes.sslmode verify-full against a CA made by the test: the pool, the monitor and the
// catalogue loader all connect with TLS. The same node refuses pgowl with sslmode disable, and
// verify-full refuses a node whose certificate another CA signed.
func TestNodeTLSVerifyFull(t *testing.T) {
	c := ownCluster(t, 0)
	node := c.Nodes[0]
	ca := owltest.NewTestCA(t, "pgowl-test-nodes")
	server := ca.Issue(t, "node", "localhost", "localhost", "127.0.0.1")
	superuserDSN := requireNodeTLS(t, node, server, ca.CertFile)

	t.Run("verify_full_reaches_the_node", func(t *testing.T) {
		o := startOwl(t, c, func(cfg *config.Config) {
			cfg.TLS.Nodes = config.NodeTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.CertFile}
		})
		conn := o.connect(t, nil)
		ctx := timeoutCtx(t, 30*time.Second)
		// A volatile SQL function makes the classifier read the catalogue on the primary.
		runOnPrimary(t, conn, "CREATE OR REPLACE FUNCTION node_tls_probe() RETURNS int LANGUAGE sql AS 'SELECT 41 + 1'")
		if got := queryInt(t, conn, "through pgowl", "SELECT node_tls_probe()"); got != 42 {
			t.Fatalf("SELECT node_tls_probe() = %d, want 42", got)
		}
		check, err := pgx.Connect(ctx, superuserDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer check.Close(ctx)
		// Every client backend pgowl opened (pool and monitor) uses TLS, and none does without.
		var withTLS, without int
		var names []string
		rows, err := check.Query(ctx, `SELECT a.application_name, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
			WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name string
			var ssl bool
			if err := rows.Scan(&name, &ssl); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
			if ssl {
				withTLS++
			} else {
				without++
			}
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		if without > 0 || withTLS < 2 {
			t.Fatalf("pgowl's backends %v: %d with TLS, %d without; want the pool's and the monitor's, all with TLS", names, withTLS, without)
		}
		if !containsString(names, "pgowl-monitor") {
			t.Errorf("no monitor connection among %v", names)
		}
		// A cancel request reaches the TLS-only node (pg_hba.conf does not apply to it).
		go func() {
			time.Sleep(300 * time.Millisecond)
			conn.PgConn().CancelRequest(context.Background())
		}()
		_, err = conn.Exec(ctx, "SELECT pg_sleep(30)")
		if pgErr, ok := asPgError(err); !ok || pgErr.Code != "57014" {
			t.Errorf("pg_sleep(30) with a cancel request after 300ms: %v, want 57014", err)
		}
		mustRun(t, conn.Conn, "after the cancel")
		// The catalogue loader logs each load, and a failed one at warn.
		waitForLog(t, o, 10*time.Second, "function catalogue read")
		if strings.Contains(o.logs.String(), "could not read the function catalogue") {
			t.Errorf("the catalogue loader could not reach the node:\n%s", o.logs.Tail(4000))
		}
	})

	t.Run("a_cancel_request_crosses_the_network_in_tls", func(t *testing.T) {
		// pgowl reaches the node through a relay that notes how each connection begins: a
		// CancelRequest in the clear starts with its length (16) and code (80877102), and
		// shows the backend's secret key to anyone on the path.
		relay := startFirstBytesRelay(t, node.Addr())
		o := startOwl(t, c, func(cfg *config.Config) {
			cfg.TLS.Nodes = config.NodeTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.CertFile}
			cfg.Nodes[0].Host, cfg.Nodes[0].Port = relay.host, relay.port
		})
		conn := o.connect(t, nil)
		ctx := timeoutCtx(t, 30*time.Second)
		mustRun(t, conn.Conn, "through the relay")
		go func() {
			time.Sleep(300 * time.Millisecond)
			conn.PgConn().CancelRequest(context.Background())
		}()
		_, err := conn.Exec(ctx, "SELECT pg_sleep(30)")
		if pgErr, ok := asPgError(err); !ok || pgErr.Code != "57014" {
			t.Fatalf("pg_sleep(30) with a cancel request after 300ms: %v, want 57014", err)
		}
		plain, total := relay.counts([]byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e})
		if plain > 0 {
			t.Errorf("%d of the %d connections pgowl opened to the node carried a CancelRequest in the clear", plain, total)
		}
	})

	t.Run("sslmode_disable_is_refused_by_the_node", func(t *testing.T) {
		o := startOwlNoWait(t, c, func(cfg *config.Config) {
			cfg.TLS.Nodes = config.NodeTLS{SSLMode: config.SSLDisable}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, o.connConfig(t, appUser, appPassword, &noticeLog{}))
		if err == nil {
			conn.Close(ctx)
			t.Fatal("logged in through pgowl with sslmode disable to a node that accepts TLS only")
		}
		if !strings.Contains(o.logs.String(), "no encryption") {
			t.Errorf("pgowl's log does not show the node's refusal of a connection without TLS:\n%s", o.logs.Tail(4000))
		}
	})

	t.Run("verify_full_refuses_a_certificate_of_another_ca", func(t *testing.T) {
		other := owltest.NewTestCA(t, "pgowl-test-other")
		o := startOwlNoWait(t, c, func(cfg *config.Config) {
			cfg.TLS.Nodes = config.NodeTLS{SSLMode: config.SSLVerifyFull, CAFile: other.CertFile}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, o.connConfig(t, appUser, appPassword, &noticeLog{}))
		if err == nil {
			conn.Close(ctx)
			t.Fatal("logged in through pgowl although the node's certificate is not signed by tls.nodes.ca_file")
		}
		if !strings.Contains(o.logs.String(), "certificate signed by unknown authority") {
			t.Errorf("pgowl's log does not show the failed verification:\n%s", o.logs.Tail(4000))
		}
	})

	t.Run("a_cancel_is_verified_against_the_node_s_host_name", func(t *testing.T) {
		// A certificate for the node's host name only, as most are, and the node configured by
		// that name: the cancel's connection goes to the backend's address (an IP address), and
		// verify-full must still check the certificate against the name, as for the pool's.
		byName := ca.Issue(t, "node-by-name", "localhost", "localhost")
		configureNodeTLS(t, node, byName, ca.CertFile, nil)
		o := startOwl(t, c, func(cfg *config.Config) {
			cfg.TLS.Nodes = config.NodeTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.CertFile}
			cfg.Nodes[0].Host = "localhost"
		})
		conn := o.connect(t, nil)
		ctx := timeoutCtx(t, 30*time.Second)
		mustRun(t, conn.Conn, "over verify-full to localhost")
		go func() {
			time.Sleep(300 * time.Millisecond)
			conn.PgConn().CancelRequest(context.Background())
		}()
		started := time.Now()
		_, err := conn.Exec(ctx, "SELECT pg_sleep(8)")
		if pgErr, ok := asPgError(err); !ok || pgErr.Code != "57014" {
			t.Errorf("pg_sleep(8) with a cancel request after 300ms: %v after %s, want 57014 (cancelled)", err, time.Since(started).Round(time.Millisecond))
			t.Logf("pgowl's log:\n%s", o.logs.Tail(1500))
		}
	})

	t.Run("client_certificate_for_a_node_that_wants_one", func(t *testing.T) {
		client := ca.Issue(t, "pgowl-to-nodes", "pgowl")
		configureNodeTLS(t, node, server, ca.CertFile, &client)
		without := startOwlNoWait(t, c, func(cfg *config.Config) {
			cfg.TLS.Nodes = config.NodeTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.CertFile}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if conn, err := pgx.ConnectConfig(ctx, without.connConfig(t, appUser, appPassword, &noticeLog{})); err == nil {
			conn.Close(ctx)
			t.Fatal("logged in through pgowl without a client certificate to a node that wants one")
		}
		o := startOwl(t, c, func(cfg *config.Config) {
			cfg.TLS.Nodes = config.NodeTLS{SSLMode: config.SSLVerifyFull, CAFile: ca.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile}
		})
		mustRun(t, o.connect(t, nil).Conn, "with tls.nodes.cert_file")
	})

}

// waitForLog waits until the instance's log holds text.
func waitForLog(t *testing.T, o *owl, timeout time.Duration, text string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(o.logs.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("pgowl did not log %q within %s:\n%s", text, timeout, o.logs.Tail(4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstBytesRelay forwards TCP connections to a node and keeps the first 8 bytes each sent.
type firstBytesRelay struct {
	host  string
	port  int
	mu    sync.Mutex
	heads [][]byte
}

// startFirstBytesRelay listens on a free loopback port and relays each connection to target
// until the test ends.
func startFirstBytesRelay(t *testing.T, target string) *firstBytesRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().(*net.TCPAddr)
	r := &firstBytesRelay{host: addr.IP.String(), port: addr.Port}
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go r.relay(client, target)
		}
	}()
	return r
}

func (r *firstBytesRelay) relay(client net.Conn, target string) {
	defer client.Close()
	head := make([]byte, 8)
	if _, err := io.ReadFull(client, head); err != nil {
		return
	}
	r.mu.Lock()
	r.heads = append(r.heads, head)
	r.mu.Unlock()
	node, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer node.Close()
	if _, err := node.Write(head); err != nil {
		return
	}
	go io.Copy(client, node)
	io.Copy(node, client)
}

// counts returns how many relayed connections began with prefix, and how many there were.
func (r *firstBytesRelay) counts(prefix []byte) (matching, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.heads {
		if bytes.HasPrefix(h, prefix) {
			matching++
		}
	}
	return matching, len(r.heads)
}
