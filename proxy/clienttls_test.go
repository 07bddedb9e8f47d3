package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// selfSigned writes a self-signed certificate with the given curve (its signature hash follows
// the curve: P-256 SHA-256, P-384 SHA-384) and returns the file paths and the DER certificate.
func selfSigned(t *testing.T, curve elliptic.Curve) (certFile, keyFile string, der []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pgowl"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err = x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	return certFile, keyFile, der
}

// TestChannelBindingHashFollowsTheCertificate checks tls-server-end-point: SHA-256 for a
// certificate signed with SHA-256, SHA-384 for one signed with SHA-384 (RFC 5929).
func TestChannelBindingHashFollowsTheCertificate(t *testing.T) {
	for _, test := range []struct {
		curve elliptic.Curve
		hash  func([]byte) []byte
	}{
		{elliptic.P256(), func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }},
		{elliptic.P384(), func(b []byte) []byte { s := sha512.Sum384(b); return s[:] }},
	} {
		certFile, keyFile, der := selfSigned(t, test.curve)
		tlsConfig, err := ClientTLSConfig(config.TLS{CertFile: certFile, KeyFile: keyFile, ClientMode: config.ClientTLSPrefer, MinVersion: config.TLSVersion12})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tlsServerEndPoint(tlsConfig), test.hash(der); string(got) != string(want) {
			t.Errorf("%s: channel binding %x, want %x", test.curve.Params().Name, got, want)
		}
	}
	if tlsServerEndPoint(nil) != nil {
		t.Error("channel binding without a certificate")
	}
}

// TestClientTLSConfigFollowsTheMode checks the TLS configuration each tls section leads to.
func TestClientTLSConfigFollowsTheMode(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t, elliptic.P256())
	caFile := certFile
	tests := []struct {
		name       string
		cfg        config.TLS
		wantNil    bool
		wantAuth   tls.ClientAuthType
		wantMinVer uint16
		wantSuites int
	}{
		{"no certificate", config.TLS{ClientMode: "prefer"}, true, 0, 0, 0},
		{"disable with a certificate", config.TLS{CertFile: certFile, KeyFile: keyFile, ClientMode: "disable"}, true, 0, 0, 0},
		{"prefer", config.TLS{CertFile: certFile, KeyFile: keyFile, ClientMode: "prefer", MinVersion: "1.2"}, false, tls.NoClientCert, tls.VersionTLS12, 0},
		{"prefer with a client CA", config.TLS{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientMode: "prefer", MinVersion: "1.3"}, false, tls.VerifyClientCertIfGiven, tls.VersionTLS13, 0},
		{"verify-ca", config.TLS{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientMode: "verify-ca", MinVersion: "1.2",
			CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}}, false, tls.RequireAndVerifyClientCert, tls.VersionTLS12, 1},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, err := ClientTLSConfig(test.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if test.wantNil {
				if got != nil {
					t.Fatal("TLS offered")
				}
				return
			}
			if got.ClientAuth != test.wantAuth || got.MinVersion != test.wantMinVer || len(got.CipherSuites) != test.wantSuites {
				t.Fatalf("ClientAuth %v, MinVersion %x, %d suites; want %v, %x, %d", got.ClientAuth, got.MinVersion, len(got.CipherSuites),
					test.wantAuth, test.wantMinVer, test.wantSuites)
			}
		})
	}
}
