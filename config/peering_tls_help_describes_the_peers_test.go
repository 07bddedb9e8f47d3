package config

import (
	"strings"
	"testing"
)

// TestPeeringTLSHelpDescribesThePeers: the flag help (pgowl serve --help) of the peering.tls.*
// keys describes the peers: the keys mean what tls.nodes' do, but NodeTLS's help tags describe
// the nodes.
func TestPeeringTLSHelpDescribesThePeers(t *testing.T) {
	for _, key := range Keys() {
		if strings.HasPrefix(key.Path, "peering.tls.") && (strings.Contains(key.Help, "nodes") || strings.Contains(key.Help, "tls.nodes")) {
			t.Errorf("--%s: help %q describes tls.nodes", key.Path, key.Help)
		}
	}
}
