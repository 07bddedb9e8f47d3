package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestSecurityKeysRefusedWithKeyPath checks that every invalid TLS, auth and access setting is
// refused with the key it concerns.
func TestSecurityKeysRefusedWithKeyPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file.pem")
	if err := os.WriteFile(file, []byte("test"), 0o600); err != nil {
		t.Fatal(err)
	}
	withCert := "tls: {cert_file: " + file + ", key_file: " + file + ", "
	tests := []struct {
		name     string
		overlay  string
		wantKeys []string
	}{
		{"valid client and node TLS", withCert + "client_mode: verify-full, client_ca_file: " + file + ", min_version: '1.3', cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256], nodes: {sslmode: verify-full, ca_file: " + file + "}}", nil},
		{"unknown client mode", "tls: {client_mode: sometimes}", []string{"tls.client_mode"}},
		{"require without a certificate", "tls: {client_mode: require}", []string{"tls.client_mode"}},
		{"verify-ca without a client CA", withCert + "client_mode: verify-ca}", []string{"tls.client_ca_file"}},
		{"unknown TLS version", "tls: {min_version: '1.1'}", []string{"tls.min_version"}},
		{"insecure cipher suite", "tls: {cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]}", []string{"tls.cipher_suites[0]"}},
		{"unknown node sslmode", "tls: {nodes: {sslmode: allow}}", []string{"tls.nodes.sslmode"}},
		{"node certificate without key", "tls: {nodes: {cert_file: " + file + "}}", []string{"tls.nodes.key_file"}},
		{"missing node CA file", "tls: {nodes: {ca_file: " + filepath.Join(dir, "missing") + "}}", []string{"tls.nodes.ca_file"}},
		{"missing users file", "auth: {users_file: " + filepath.Join(dir, "missing") + "}", []string{"auth.users_file"}},
		{"auth query without a query", "auth: {query_enabled: true, query: ''}", []string{"auth.query"}},
		{"rule with a bad type", "access: {rules: [{type: local, method: trust}]}", []string{"access.rules[0].type"}},
		{"rule with a bad CIDR", "access: {rules: [{address: 10.0.0.1/8, method: trust}]}", []string{"access.rules[0].address"}},
		{"rule with a bad address", "access: {rules: [{address: somewhere, method: trust}]}", []string{"access.rules[0].address"}},
		{"rule with an empty name", "access: {rules: [{user: 'a,,b', method: trust}]}", []string{"access.rules[0].user"}},
		{"rule with a bad method", "access: {rules: [{method: password}]}", []string{"access.rules[0].method"}},
		{"cert rule without hostssl and CA", "access: {rules: [{method: cert}]}", []string{"access.rules[0].method", "access.rules[0].method", "access.rules[0].type"}},
		{"valid rules", withCert + "client_ca_file: " + file + "}\naccess: {rules: [{type: hostssl, address: 10.0.0.0/8, database: 'a,b', user: app, method: cert}, {address: '::1', method: reject}]}", nil},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			_, err := decodeWith(t, test.overlay)
			var keys []string
			for _, problem := range configErrors(err) {
				keys = append(keys, problem.Key)
			}
			if !reflect.DeepEqual(keys, test.wantKeys) {
				t.Fatalf("problems name %v, want %v (error: %v)", keys, test.wantKeys, err)
			}
		})
	}
	// Users may come from the users file alone.
	cfg, err := decodeWith(t, "{}")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Users = nil
	cfg.Auth.UsersFile = file
	if err := cfg.Validate(); err != nil {
		t.Fatalf("no users but a users file: %v", err)
	}
	rule := AccessRule{}
	rule.setDefaults()
	if rule != (AccessRule{Type: AccessHost, Address: "all", Database: "all", User: "all"}) {
		t.Fatalf("rule defaults %+v", rule)
	}
}
