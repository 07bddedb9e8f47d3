package config

import (
	"reflect"
	"testing"
)

// TestPeeringAndTopologyKeysRefusedWithKeyPath checks that a peering section that could not pass cancels
// on (no instance number, no peering listener, clashing or out-of-range numbers, a peer without
// an address) is refused with the key it concerns, and that a valid one decodes.
func TestPeeringAndTopologyKeysRefusedWithKeyPath(t *testing.T) {
	tests := []struct {
		name     string
		overlay  string
		wantKeys []string
	}{
		{"off", "peering: {}", nil},
		{"valid, own entry without address", "listen_reuse_port: true\npeering: {instance: 2, listen: '127.0.0.1:7001', peers: [{instance: 1, address: '10.0.0.1:7001'}, {instance: 2}]}", nil},
		{"peers without an instance number", "peering: {peers: [{instance: 1, address: '10.0.0.1:7001'}]}", []string{"peering.instance"}},
		{"instance number out of range", "peering: {instance: 128, listen: '127.0.0.1:7001'}", []string{"peering.instance"}},
		{"no peering listener", "peering: {instance: 1}", []string{"peering.listen"}},
		{"peering listener not host:port", "peering: {instance: 1, listen: somewhere}", []string{"peering.listen"}},
		{"two peers with one number", "peering: {instance: 1, listen: ':7001', peers: [{instance: 2, address: 'a:1'}, {instance: 2, address: 'b:1'}]}", []string{"peering.peers[1].instance"}},
		{"peer without an address", "peering: {instance: 1, listen: ':7001', peers: [{instance: 2}]}", []string{"peering.peers[0].address"}},
		{"patroni URLs", "topology: {patroni: {urls: ['http://127.0.0.1:8008', 'https://pg-0:8008']}}", nil},
		{"patroni URL without scheme", "topology: {patroni: {urls: ['127.0.0.1:8008']}}", []string{"topology.patroni.urls[0]"}},
		{"peer number out of range", "peering: {instance: 1, listen: ':7001', peers: [{instance: 0, address: 'a:1'}]}", []string{"peering.peers[0].instance"}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			cfg, err := decodeWith(t, test.overlay)
			var keys []string
			for _, problem := range configErrors(err) {
				keys = append(keys, problem.Key)
			}
			if !reflect.DeepEqual(keys, test.wantKeys) {
				t.Fatalf("problems name %v, want %v (error: %v)", keys, test.wantKeys, err)
			}
			if err == nil && test.name == "valid, own entry without address" {
				want := Peering{Instance: 2, Listen: "127.0.0.1:7001", Peers: []Peer{{Instance: 1, Address: "10.0.0.1:7001"}, {Instance: 2}}}
				if !reflect.DeepEqual(cfg.Peering, want) || !cfg.ListenReusePort {
					t.Fatalf("decoded peering %+v, listen_reuse_port %v; want %+v, true", cfg.Peering, cfg.ListenReusePort, want)
				}
			}
		})
	}
}
