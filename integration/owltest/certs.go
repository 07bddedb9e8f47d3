package owltest

import (
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
	"testing"
	"time"
)

// TestCA is a certificate authority made for one test, with its certificate written as a PEM file.
type TestCA struct {
	// CertFile is the CA certificate in PEM, for ca_file and sslrootcert settings.
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
	serial   int64
}

// CertPair is a certificate and its private key written as PEM files.
type CertPair struct {
	CertFile string
	KeyFile  string
}

// NewTestCA creates a CA named name whose files live in a directory removed when t ends.
func NewTestCA(t testing.TB, name string) *TestCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate the CA key: %v", err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create the CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The directory may be read by the postgres user when the test runs as root.
	os.Chmod(dir, 0o755)
	ca := &TestCA{cert: cert, key: key, dir: dir, serial: 1, CertFile: filepath.Join(dir, name+"-ca.crt")}
	writePEM(t, ca.CertFile, "CERTIFICATE", der, 0o644)
	return ca
}

// Issue signs a certificate for commonName, valid for the given host names and IP addresses,
// usable by servers and clients alike, and writes it and its key under fileName.crt and fileName.key.
func (ca *TestCA) Issue(t testing.TB, fileName, commonName string, hosts ...string) CertPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate a key: %v", err)
	}
	ca.serial++
	template := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, host := range hosts {
		if ip := net.ParseIP(host); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, host)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("sign the certificate of %s: %v", commonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair := CertPair{CertFile: filepath.Join(ca.dir, fileName+".crt"), KeyFile: filepath.Join(ca.dir, fileName+".key")}
	writePEM(t, pair.CertFile, "CERTIFICATE", der, 0o644)
	writePEM(t, pair.KeyFile, "PRIVATE KEY", keyDER, 0o600)
	return pair
}

// writePEM writes one PEM block to path.
func writePEM(t testing.TB, path, blockType string, der []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), mode); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}
