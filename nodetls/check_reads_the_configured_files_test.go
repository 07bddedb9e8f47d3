package nodetls

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pgowl/pgowl/config"
)

// TestCheckReadsTheFilesWhateverPGSSLCERTMODESays: Check judges peering.tls's files alone, not
// what PGSSLCERTMODE in pgowl's environment would let through.
func TestCheckReadsTheFilesWhateverPGSSLCERTMODESays(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.pem")
	if err := os.WriteFile(broken, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("PGSSLCERTMODE=disable hides a broken cert_file", func(t *testing.T) {
		t.Setenv("PGSSLCERTMODE", "disable")
		if err := ForPeers(config.PeerTLS{SSLMode: config.SSLVerifyFull, CertFile: broken, KeyFile: broken}).Check(); err == nil {
			t.Error("Check passed a cert_file and key_file that hold no PEM, because of PGSSLCERTMODE")
		}
	})
}

// TestCheckUnderDisableReadsNoFile: under sslmode disable no dial reads a file, and neither does
// Check.
func TestCheckUnderDisableReadsNoFile(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "broken.pem")
	os.WriteFile(broken, []byte("not a certificate\n"), 0o600)
	if err := ForPeers(config.PeerTLS{SSLMode: config.SSLDisable, CAFile: broken}).Check(); err != nil {
		t.Errorf("Check under disable refused a ca_file no dial reads: %v", err)
	}
}
