package monitor

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/nodetls"
)

// TestARenewedNodeCAReachesTheNextDial: the monitor reads tls.nodes' files at each dial, as the
// pools do, so that a CA bundle or client certificate renewed on disk (cert-manager, a rotation)
// is what its next connection uses. It read them once, when it was made: after a rotation its
// reconnects presented the old certificate, and the nodes looked down until a restart. Here the
// CA file turns unreadable after the poller is made; the next dial must fail on it, not on the
// closed port it was about to try.
func TestARenewedNodeCAReachesTheNextDial(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "nodes-ca.crt")
	if err := os.WriteFile(caFile, selfSignedCA(t), 0o600); err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	listener.Close() // nothing answers there
	opts := Options{User: "monitor", Database: "postgres",
		TLS: nodetls.Settings{SSLMode: config.SSLVerifyFull, CAFile: caFile}}.withDefaults()
	p, err := newPoller(0, NodeAddr{Name: "pg1", Host: "127.0.0.1", Port: port}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, []byte("renewed, but not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = p.dial(ctx)
	if err == nil {
		t.Fatal("a dial to a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "CA") {
		t.Errorf("the dial after the CA file changed failed with %q: the file was not read again", err)
	}
}

// selfSignedCA returns the PEM of a throw-away CA certificate.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test nodes CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
