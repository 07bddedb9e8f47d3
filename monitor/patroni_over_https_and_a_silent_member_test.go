package monitor

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
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestASilentPatroniMemberDoesNotDelayTheAnswer: in a failover the old leader's host often
// accepts nothing and answers nothing. The URLs used to be asked one after another, each given
// monitor.query_timeout, so with the silent member listed first every read of /cluster came a
// whole timeout late, exactly while the roles change. All are asked at once now, and the first
// valid answer is taken.
func TestASilentPatroniMemberDoesNotDelayTheAnswer(t *testing.T) {
	body := readRecorded(t, "steady")
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // answers nothing until the client gives up, or the test ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer silent.Close()
	defer close(release)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer good.Close()

	const queryTimeout = 20 * time.Second
	r := newPatroniReader([]string{silent.URL, good.URL}, PatroniTLS{}, queryTimeout)
	began := time.Now()
	res := r.read(context.Background())
	took := time.Since(began)
	if res.err != nil || res.url != good.URL {
		t.Fatalf("read from %q: %v; want the answer of %s", res.url, res.err, good.URL)
	}
	if took >= queryTimeout/2 {
		t.Errorf("the answer took %s: the silent member listed first held it back (query timeout %s)", took, queryTimeout)
	}
}

// TestPatroniOverHTTPSWithItsOwnCAAndAClientCertificate: Patroni's REST API over https is
// usually signed by the cluster's own CA, and with restapi.verify_client it asks for a client
// certificate. topology.patroni.ca_file and cert_file/key_file give them; without the CA the
// read fails on the certificate, and a renewed CA file is read at the next read.
func TestPatroniOverHTTPSWithItsOwnCAAndAClientCertificate(t *testing.T) {
	body := readRecorded(t, "steady")
	dir := t.TempDir()
	clientCert, clientKey := writeSelfSigned(t, dir, "pgowl")
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "pgowl" {
			http.Error(w, "no client certificate", http.StatusForbidden)
			return
		}
		w.Write(body)
	}))
	server.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	server.StartTLS()
	defer server.Close()
	caFile := filepath.Join(dir, "patroni-ca.pem")
	writeFile(t, caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}))

	t.Run("SystemRootsRefuseTheCertificate", func(t *testing.T) {
		res := newPatroniReader([]string{server.URL}, PatroniTLS{CertFile: clientCert, KeyFile: clientKey}, 5*time.Second).read(context.Background())
		if res.err == nil || !strings.Contains(res.err.Error(), "certificate") {
			t.Fatalf("without ca_file: %v; want a certificate error", res.err)
		}
	})
	t.Run("WithoutAClientCertificate", func(t *testing.T) {
		res := newPatroniReader([]string{server.URL}, PatroniTLS{CAFile: caFile}, 5*time.Second).read(context.Background())
		if res.err == nil {
			t.Fatal("read without the client certificate the server requires succeeded")
		}
	})
	t.Run("CAAndClientCertificate", func(t *testing.T) {
		r := newPatroniReader([]string{server.URL}, PatroniTLS{CAFile: caFile, CertFile: clientCert, KeyFile: clientKey}, 5*time.Second)
		res := r.read(context.Background())
		if res.err != nil {
			t.Fatalf("read with ca_file, cert_file and key_file: %v", res.err)
		}
		if leader, _ := res.cluster.leader(); leader.Name != "m1" {
			t.Errorf("leader %q, want m1", leader.Name)
		}
		// A certificate renewed before its key: the files do not match for a moment, and the
		// client built from the last files that did goes on.
		renewedCert, _ := writeSelfSigned(t, t.TempDir(), "pgowl")
		original, err := os.ReadFile(clientCert)
		if err != nil {
			t.Fatal(err)
		}
		renewed, err := os.ReadFile(renewedCert)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, clientCert, renewed)
		if res := r.read(context.Background()); res.err != nil {
			t.Errorf("a read while cert_file and key_file did not match for a moment: %v; want the last good client to go on", res.err)
		} else if !strings.Contains(res.warning, "cert_file") {
			t.Errorf("the read with the old client carries the warning %q; want the load error, for the log", res.warning)
		}
		if res := r.read(context.Background()); res.warning != "" {
			t.Errorf("the same load error is warned of again: %q; once per cause", res.warning)
		}
		writeFile(t, clientCert, original)
		// The CA file is replaced by one that does not sign the server: the next read uses it.
		otherCert, _ := writeSelfSigned(t, dir, "another CA")
		data, err := os.ReadFile(otherCert)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, caFile, data)
		if res := r.read(context.Background()); res.err == nil {
			t.Error("the read after ca_file was replaced by another CA succeeded: the file was not read again")
		}
	})
}

// writeSelfSigned writes a self-signed certificate named commonName and its key into dir.
func writeSelfSigned(t *testing.T, dir, commonName string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: commonName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ReplaceAll(commonName, " ", "-")
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	return certFile, keyFile
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
