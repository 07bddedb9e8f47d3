package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// writeSelfSignedCert writes a throw-away certificate for 127.0.0.1 and its key.
func writeSelfSignedCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "pgowl test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestTLS checks that pgowl answers SSLRequest with S when tls.cert_file and
// tls.key_file are set, that a client then talks TLS and is routed as usual,
// and that without them a client that requires TLS is refused.
func TestTLS(t *testing.T) {
	c := sharedClusterFor(t)
	certFile, keyFile := writeSelfSignedCert(t)
	withTLS := startOwl(t, c, func(cfg *config.Config) {
		cfg.TLS.CertFile, cfg.TLS.KeyFile = certFile, keyFile
	})
	ctx := timeoutCtx(t, 20*time.Second)

	connCfg, err := pgx.ParseConfig(withTLS.dsn(appUser, appPassword, appDatabase, url.Values{"sslmode": {"require"}}))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, connCfg)
	if err != nil {
		t.Fatalf("sslmode=require against pgowl with TLS: %v", err)
	}
	defer conn.Close(context.Background())
	if _, ok := conn.PgConn().Conn().(*tls.Conn); !ok {
		t.Fatalf("the client connection is %T, not TLS", conn.PgConn().Conn())
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&n); err != nil || n != 42 {
		t.Fatalf("query over TLS: %d, %v", n, err)
	}

	plain := startOwl(t, c, nil)
	connCfg, err = pgx.ParseConfig(plain.dsn(appUser, appPassword, appDatabase, url.Values{"sslmode": {"require"}}))
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.ConnectConfig(ctx, connCfg); err == nil {
		conn.Close(context.Background())
		t.Fatal("sslmode=require succeeded against pgowl without TLS; want a refusal (SSLRequest answered N)")
	}
	// sslmode=prefer falls back to plain text after N.
	connCfg, err = pgx.ParseConfig(plain.dsn(appUser, appPassword, appDatabase, url.Values{"sslmode": {"prefer"}}))
	if err != nil {
		t.Fatal(err)
	}
	conn2, err := pgx.ConnectConfig(ctx, connCfg)
	if err != nil {
		t.Fatalf("sslmode=prefer against pgowl without TLS: %v", err)
	}
	conn2.Close(context.Background())
}
