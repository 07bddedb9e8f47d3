package integration

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestACancelRequestIsNotALogin: a CancelRequest comes on a connection of its own, which pgowl
// refuses as a login at limits.max_client_connections and during a shutdown's drain. PostgreSQL
// acts on a cancel request whatever its connection limits and state; pgowl must too, since a
// client at the limit, or one whose statement holds up the drain, is the one that needs it most.
// Each case runs a long statement, cancels it through pgx (a CancelRequest to pgowl's address)
// and wants it to end with 57014 at once.
func TestACancelRequestIsNotALogin(t *testing.T) {
	c := sharedClusterFor(t)
	files := newClientTLSFiles(t)
	// Over TLS: pgx (as libpq 17) sends its cancel over TLS when its connection used TLS, an
	// SSLRequest first, which the refusals must answer before they can read the cancel.
	for _, overTLS := range []bool{false, true} {
		name := "plain"
		if overTLS {
			name = "tls"
		}
		t.Run(name+"_at_max_client_connections", func(t *testing.T) {
			o := startOwl(t, c, func(cfg *config.Config) {
				cfg.Limits.MaxClientConnections = 1
				files.withClientTLS(config.ClientTLSPrefer)(cfg)
			})
			params := url.Values{"sslmode": {"disable"}}
			if overTLS {
				params = files.verifyFull(nil)
			}
			ctx := timeoutCtx(t, statementTimeout)
			conn, err := pgx.Connect(ctx, o.dsn(appUser, appPassword, appDatabase, params))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			wantCancelledAtOnce(t, conn, "a statement of the one client max_client_connections allows")
			// The limit still holds for logins.
			second, err := pgx.Connect(ctx, o.dsn(appUser, appPassword, appDatabase, params))
			if err == nil {
				second.Close(ctx)
				t.Fatal("a second client logged in past limits.max_client_connections = 1")
			}
			wantSQLState(t, "a second login past limits.max_client_connections", err, "53300")
		})

		t.Run(name+"_during_the_shutdown_drain", func(t *testing.T) {
			port := freePort(t)
			tlsYAML := fmt.Sprintf("tls: {cert_file: %q, key_file: %q, client_mode: prefer}\n", files.server.CertFile, files.server.KeyFile)
			p := startProcessOwl(t, port, owlYAML(c, port, []string{"pg1", "pg2"}, appPassword, "shutdown_timeout: 30s\n"+tlsYAML))
			p.waitLog(t, proxyReadyTimeout, "pgowl serving")
			ctx := timeoutCtx(t, time.Minute)
			dsn := p.dsn(appPassword, appDatabase)
			if overTLS {
				dsn = strings.Replace(dsn, "sslmode=disable", "sslmode=verify-full&sslrootcert="+url.QueryEscape(files.ca.CertFile), 1)
			}
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			wantCancelledAtOnce(t, conn, "a statement running through pgowl's drain", func() {
				p.signal(t, syscall.SIGTERM)
				p.waitLog(t, 5*time.Second, "pgowl is shutting down")
			})
			// The session ends at its next message outside a transaction, and with it the drain.
			_, err = conn.Exec(ctx, "SELECT 1")
			wantSQLState(t, "the client's next statement during the drain", err, "57P01")
			if code := p.wait(t, 10*time.Second); code != 0 {
				t.Errorf("pgowl exited with %d, want 0: no transaction was left to roll back", code)
			}
		})
	}
}

// wantCancelledAtOnce runs a 30-second sleep on conn, runs before (if any) once the statement is
// running, cancels it with a CancelRequest and wants it to fail with 57014 within a few seconds.
func wantCancelledAtOnce(t *testing.T, conn *pgx.Conn, what string, before ...func()) {
	t.Helper()
	ctx := timeoutCtx(t, time.Minute)
	ended := make(chan error, 1)
	began := time.Now()
	go func() {
		_, err := conn.Exec(context.Background(), "SELECT pg_sleep(30)")
		ended <- err
	}()
	time.Sleep(500 * time.Millisecond) // the statement is on its node
	for _, f := range before {
		f()
	}
	cancelled := time.Now()
	if err := conn.PgConn().CancelRequest(ctx); err != nil {
		t.Fatalf("%s: sending the cancel request: %v", what, err)
	}
	select {
	case err := <-ended:
		t.Logf("%s: ended %s after the cancel request (%s after it began): %v", what,
			time.Since(cancelled).Round(time.Millisecond), time.Since(began).Round(time.Millisecond), err)
		wantSQLState(t, what+", cancelled", err, "57014")
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still running 10s after its cancel request: the request did not reach the node", what)
	}
}
