package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
)

// TestABrokenPeeringTLSFileIsRefusedAtStart: the peering.tls files are read at each cancel passed
// on to a peer, which is no time to find one broken: a ca_file that holds no certificate is
// refused when pgowl starts.
func TestABrokenPeeringTLSFileIsRefusedAtStart(t *testing.T) {
	bogus := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(bogus, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Nodes = []config.Node{{Name: "pg1", Host: "127.0.0.1", Port: 1}}
	cfg.Users = []config.User{{Name: "app", Password: "secret", Auth: "scram-sha-256"}}
	cfg.Listen = "127.0.0.1:0"
	cfg.Peering.Instance, cfg.Peering.Listen = 1, "127.0.0.1:0"
	cfg.Peering.Peers = []config.Peer{{Instance: 1}, {Instance: 2, Address: "127.0.0.1:1"}}
	cfg.Peering.TLS = config.PeerTLS{SSLMode: config.SSLVerifyFull, CAFile: bogus}
	err := cfg.Validate()
	if err == nil {
		var in *Instance
		if in, err = Build(cfg, zerolog.Nop()); err == nil && in.peerListener != nil {
			in.peerListener.Close()
		}
	}
	if err == nil || !strings.Contains(err.Error(), "peering.tls") {
		t.Errorf("a peering.tls.ca_file with no certificate: %v; want pgowl to refuse to start, naming peering.tls", err)
	}
}
