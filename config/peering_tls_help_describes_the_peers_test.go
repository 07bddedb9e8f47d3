package config

import (
	"strings"
	"testing"
)

// TestPeeringTLSHelpDescribesThePeers: the flag help (pgowl serve --help) of the
// peering.tls.* keys comes from NodeTLS's help tags, written for tls.nodes.
func TestPeeringTLSHelpDescribesThePeers(t *testing.T) {
	for _, key := range Keys() {
		if strings.HasPrefix(key.Path, "peering.tls.") && (strings.Contains(key.Help, "nodes") || strings.Contains(key.Help, "tls.nodes")) {
			t.Errorf("--%s: help %q describes tls.nodes", key.Path, key.Help)
		}
	}
}
