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
				want := Peering{Instance: 2, Listen: "127.0.0.1:7001", Peers: []Peer{{Instance: 1, Address: "10.0.0.1:7001"}, {Instance: 2}},
					TLS: PeerTLS{SSLMode: SSLPrefer}}
				if !reflect.DeepEqual(cfg.Peering, want) || !cfg.ListenReusePort {
					t.Fatalf("decoded peering %+v, listen_reuse_port %v; want %+v, true", cfg.Peering, cfg.ListenReusePort, want)
				}
			}
		})
	}
}

// TestPeeringSelfTakesTheInstanceFromItsPeersEntry checks peering.self: the
// instance number comes from the peers entry with that address, so that
// replicas sharing one file differ only by it; a self that names no entry,
// or another number than peering.instance, is refused with its key.
func TestPeeringSelfTakesTheInstanceFromItsPeersEntry(t *testing.T) {
	peers := "peers: [{instance: 1, address: 'pgowl-0.pgowl-peering:6490'}, {instance: 2, address: 'pgowl-1.pgowl-peering:6490'}]"
	tests := []struct {
		name         string
		overlay      string
		wantInstance int
		wantKeys     []string
	}{
		{"self names the second entry", "peering: {listen: ':6490', self: 'pgowl-1.pgowl-peering:6490', " + peers + "}", 2, nil},
		{"self names the first entry", "peering: {listen: ':6490', self: 'pgowl-0.pgowl-peering:6490', " + peers + "}", 1, nil},
		{"self agrees with instance", "peering: {instance: 2, listen: ':6490', self: 'pgowl-1.pgowl-peering:6490', " + peers + "}", 2, nil},
		{"self names no entry", "peering: {listen: ':6490', self: 'pgowl-7.pgowl-peering:6490', " + peers + "}", 0, []string{"peering.self", "peering.instance"}},
		{"self disagrees with instance", "peering: {instance: 1, listen: ':6490', self: 'pgowl-1.pgowl-peering:6490', " + peers + "}", 0, []string{"peering.self"}},
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
			if err == nil && cfg.Peering.Instance != test.wantInstance {
				t.Fatalf("peering.instance is %d, want %d", cfg.Peering.Instance, test.wantInstance)
			}
		})
	}
}
