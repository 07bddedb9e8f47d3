package proxy

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/pgowl/pgowl/config"
)

// ClientTLSConfig builds the TLS configuration offered to clients from the tls section: nil when no
// certificate is configured or tls.client_mode is disable, so that SSLRequest is answered N.
//
// Client certificates are asked for whenever tls.client_ca_file is set, and verified against it:
// verify-ca and verify-full refuse a handshake without one; the other modes accept it without one,
// and the cert access method then refuses the login.
func ClientTLSConfig(cfg config.TLS) (*tls.Config, error) {
	if cfg.CertFile == "" || cfg.ClientMode == config.ClientTLSDisable {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls.cert_file: %w", err)
	}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.MinVersion == config.TLSVersion13 {
		tlsConfig.MinVersion = tls.VersionTLS13
	}
	for _, name := range cfg.CipherSuites {
		id, ok := config.CipherSuiteID(name)
		if !ok {
			return nil, fmt.Errorf("tls.cipher_suites: %q is not a secure TLS 1.2 cipher suite", name)
		}
		tlsConfig.CipherSuites = append(tlsConfig.CipherSuites, id)
	}
	if cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.client_ca_file: %s holds no PEM certificate", cfg.ClientCAFile)
		}
		tlsConfig.ClientCAs = pool
		tlsConfig.ClientAuth = tls.VerifyClientCertIfGiven
		if cfg.ClientMode == config.ClientTLSVerifyCA || cfg.ClientMode == config.ClientTLSVerifyFull {
			tlsConfig.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return tlsConfig, nil
}

// tlsServerEndPoint returns the channel binding data of type tls-server-end-point (RFC 5929) of
// the certificate pgowl presents: its hash with the hash function of its signature, SHA-256 for
// MD5 and SHA-1. It returns nil when there is no certificate or its signature hash is unknown
// (Ed25519), and SCRAM-SHA-256-PLUS is then not offered.
func tlsServerEndPoint(tlsConfig *tls.Config) []byte {
	if tlsConfig == nil || len(tlsConfig.Certificates) == 0 {
		return nil
	}
	leaf := tlsConfig.Certificates[0].Leaf
	if leaf == nil {
		parsed, err := x509.ParseCertificate(tlsConfig.Certificates[0].Certificate[0])
		if err != nil {
			return nil
		}
		leaf = parsed
	}
	switch leaf.SignatureAlgorithm {
	case x509.MD5WithRSA, x509.SHA1WithRSA, x509.ECDSAWithSHA1, x509.DSAWithSHA1,
		x509.SHA256WithRSA, x509.SHA256WithRSAPSS, x509.ECDSAWithSHA256, x509.DSAWithSHA256:
		sum := sha256.Sum256(leaf.Raw)
		return sum[:]
	case x509.SHA384WithRSA, x509.SHA384WithRSAPSS, x509.ECDSAWithSHA384:
		sum := sha512.Sum384(leaf.Raw)
		return sum[:]
	case x509.SHA512WithRSA, x509.SHA512WithRSAPSS, x509.ECDSAWithSHA512:
		sum := sha512.Sum512(leaf.Raw)
		return sum[:]
	}
	return nil
}
