package integration

import (
	"context"
	"crypto/tls"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
)

// clientTLSFiles are the certificates of the client TLS tests, all signed by one test CA.
type clientTLSFiles struct {
	ca       *owltest.TestCA
	server   owltest.CertPair // pgowl's, for localhost and 127.0.0.1
	app      owltest.CertPair // a client certificate whose common name is appUser
	mallory  owltest.CertPair // a client certificate for another name
	stranger owltest.CertPair // a client certificate for appUser signed by another CA
}

func newClientTLSFiles(t *testing.T) clientTLSFiles {
	t.Helper()
	ca := owltest.NewTestCA(t, "pgowl-test-clients")
	other := owltest.NewTestCA(t, "pgowl-test-strangers")
	return clientTLSFiles{
		ca:       ca,
		server:   ca.Issue(t, "pgowl", "localhost", "localhost", "127.0.0.1"),
		app:      ca.Issue(t, "app-client", appUser),
		mallory:  ca.Issue(t, "mallory-client", "mallory"),
		stranger: other.Issue(t, "stranger-client", appUser),
	}
}

// withClientTLS configures pgowl's client TLS with the test certificates and mode.
func (f clientTLSFiles) withClientTLS(mode string) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.TLS.CertFile, cfg.TLS.KeyFile = f.server.CertFile, f.server.KeyFile
		cfg.TLS.ClientCAFile = f.ca.CertFile
		cfg.TLS.ClientMode = mode
	}
}

// tlsLogin connects to o as user with the given libpq TLS parameters, lets adjust change the
// configuration, and returns the connection (closed when t ends) or the error.
func tlsLogin(t *testing.T, o *owl, user, password string, params url.Values, adjust func(*pgx.ConnConfig)) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(o.dsn(user, password, appDatabase, params))
	if err != nil {
		t.Fatalf("parse the client configuration: %v", err)
	}
	if adjust != nil {
		adjust(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { conn.Close(context.Background()) })
	}
	return conn, err
}

// verifyFull returns libpq parameters for sslmode=verify-full against the test CA, with a client certificate when pair is set.
func (f clientTLSFiles) verifyFull(pair *owltest.CertPair, extra ...string) url.Values {
	params := url.Values{"sslmode": {"verify-full"}, "sslrootcert": {f.ca.CertFile}}
	if pair != nil {
		params.Set("sslcert", pair.CertFile)
		params.Set("sslkey", pair.KeyFile)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		params.Set(extra[i], extra[i+1])
	}
	return params
}

// mustRun runs SELECT 42 on conn through pgowl (a node answers it).
func mustRun(t *testing.T, conn *pgx.Conn, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
	defer cancel()
	var got int
	if err := conn.QueryRow(ctx, "SELECT 42").Scan(&got); err != nil || got != 42 {
		t.Fatalf("%s: SELECT 42 = %d, %v", what, got, err)
	}
}

// TestClientTLSRequireAndChannelBinding: under tls.client_mode require, a client with
// sslmode=verify-full and channel_binding=require logs in (SCRAM-SHA-256-PLUS) and a client
// without TLS is refused.
func TestClientTLSRequireAndChannelBinding(t *testing.T) {
	c := sharedClusterFor(t)
	files := newClientTLSFiles(t)
	o := startOwl(t, c, files.withClientTLS(config.ClientTLSRequire))

	conn, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(nil, "channel_binding", "require"), nil)
	if err != nil {
		t.Fatalf("verify-full with channel_binding=require: %v", err)
	}
	mustRun(t, conn, "channel-bound login")
	if !strings.Contains(o.logs.String(), `"channel_binding":true`) {
		t.Errorf("pgowl did not log a channel-bound SCRAM login:\n%s", o.logs.Tail(3000))
	}

	_, err = tlsLogin(t, o, appUser, appPassword, url.Values{"sslmode": {"disable"}}, nil)
	if pgErr := wantSQLState(t, "login without TLS under require", err, "28000"); pgErr != nil && !strings.Contains(pgErr.Message, "TLS is required") {
		t.Errorf("refusal without TLS says %q, want it to name the TLS requirement", pgErr.Message)
	}

	// A wrong password over a channel-bound exchange is still a wrong password.
	_, err = tlsLogin(t, o, appUser, "not-the-password", files.verifyFull(nil, "channel_binding", "require"), nil)
	wantSQLState(t, "channel-bound login with a wrong password", err, "28P01")
}

// TestClientTLSModes checks verify-full's client certificates, disable, the minimum version and
// the cipher suites.
func TestClientTLSModes(t *testing.T) {
	c := sharedClusterFor(t)
	files := newClientTLSFiles(t)

	t.Run("verify_full_wants_a_certificate_naming_the_user", func(t *testing.T) {
		o := startOwl(t, c, files.withClientTLS(config.ClientTLSVerifyFull))
		conn, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(&files.app), nil)
		if err != nil {
			t.Fatalf("login with a certificate for %s: %v", appUser, err)
		}
		mustRun(t, conn, "verify-full login")
		_, err = tlsLogin(t, o, appUser, appPassword, files.verifyFull(&files.mallory), nil)
		if pgErr := wantSQLState(t, "certificate for mallory logging in as app", err, "28000"); pgErr != nil && !strings.Contains(pgErr.Message, "common name") {
			t.Errorf("refusal says %q, want the common name named", pgErr.Message)
		}
		if _, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(nil), nil); err == nil {
			t.Error("logged in without a client certificate under verify-full")
		}
		if _, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(&files.stranger), nil); err == nil {
			t.Error("logged in with a client certificate of another CA under verify-full")
		}
	})

	t.Run("verify_ca_wants_a_certificate_of_the_ca_whatever_its_name", func(t *testing.T) {
		o := startOwl(t, c, files.withClientTLS(config.ClientTLSVerifyCA))
		conn, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(&files.mallory), nil)
		if err != nil {
			t.Fatalf("login as %s with a certificate of the CA for another name: %v", appUser, err)
		}
		mustRun(t, conn, "verify-ca login")
		if _, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(nil), nil); err == nil {
			t.Error("logged in without a client certificate under verify-ca")
		}
		if _, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(&files.stranger), nil); err == nil {
			t.Error("logged in with a client certificate of another CA under verify-ca")
		}
		_, err = tlsLogin(t, o, appUser, appPassword, url.Values{"sslmode": {"disable"}}, nil)
		wantSQLState(t, "login without TLS under verify-ca", err, "28000")
	})

	t.Run("disable_answers_N_even_with_a_certificate", func(t *testing.T) {
		o := startOwl(t, c, files.withClientTLS(config.ClientTLSDisable))
		if _, err := tlsLogin(t, o, appUser, appPassword, url.Values{"sslmode": {"require"}}, nil); err == nil {
			t.Fatal("sslmode=require logged in under tls.client_mode disable")
		}
		conn, err := tlsLogin(t, o, appUser, appPassword, url.Values{"sslmode": {"disable"}}, nil)
		if err != nil {
			t.Fatalf("plain login under disable: %v", err)
		}
		mustRun(t, conn, "plain login")
	})

	t.Run("min_version_1_3_refuses_tls_1_2", func(t *testing.T) {
		o := startOwl(t, c, func(cfg *config.Config) {
			files.withClientTLS(config.ClientTLSRequire)(cfg)
			cfg.TLS.MinVersion = config.TLSVersion13
		})
		maxTLS12 := func(cfg *pgx.ConnConfig) { cfg.TLSConfig.MaxVersion = tls.VersionTLS12 }
		if _, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(nil), maxTLS12); err == nil {
			t.Fatal("a TLS 1.2 client logged in under tls.min_version 1.3")
		}
		conn, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(nil), nil)
		if err != nil {
			t.Fatalf("TLS 1.3 client: %v", err)
		}
		mustRun(t, conn, "TLS 1.3 login")
	})

	t.Run("cipher_suites_limit_tls_1_2", func(t *testing.T) {
		const allowed, other = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
		o := startOwl(t, c, func(cfg *config.Config) {
			files.withClientTLS(config.ClientTLSRequire)(cfg)
			cfg.TLS.CipherSuites = []string{allowed}
		})
		suite := func(name string) func(*pgx.ConnConfig) {
			id, _ := config.CipherSuiteID(name)
			return func(cfg *pgx.ConnConfig) {
				cfg.TLSConfig.MaxVersion = tls.VersionTLS12
				cfg.TLSConfig.CipherSuites = []uint16{id}
			}
		}
		if _, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(nil), suite(other)); err == nil {
			t.Fatalf("a client offering only %s logged in", other)
		}
		conn, err := tlsLogin(t, o, appUser, appPassword, files.verifyFull(nil), suite(allowed))
		if err != nil {
			t.Fatalf("a client offering %s: %v", allowed, err)
		}
		mustRun(t, conn, "login with the allowed suite")
	})
}
