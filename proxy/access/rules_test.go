package access

import (
	"net/netip"
	"testing"

	"github.com/pgowl/pgowl/config"
)

// TestDecideFirstMatchingRule checks every kind of match and the refusal of a login no rule matches.
func TestDecideFirstMatchingRule(t *testing.T) {
	rules, err := Compile([]config.AccessRule{
		{Type: "host", Address: "all", Database: "all", User: "blocked", Method: "reject"},
		{Type: "hostssl", Address: "all", Database: "all", User: "certuser", Method: "cert"},
		{Type: "hostnossl", Address: "10.0.0.0/8", Database: "all", User: "all", Method: "reject"},
		{Type: "host", Address: "10.1.2.3", Database: "reports,audit", User: "all", Method: "trust"},
		{Type: "host", Address: "10.0.0.0/8", Database: "all", User: "app,web", Method: "md5"},
		{Type: "hostssl", Address: "all", Database: "all", User: "all", Method: "scram-sha-256"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr
	tests := []struct {
		name  string
		login Login
		want  Decision
	}{
		{"user rule rejects", Login{ip("10.1.2.3"), true, "reports", "blocked"}, Decision{MethodReject, 0}},
		{"hostssl rule with TLS", Login{ip("192.168.1.1"), true, "db", "certuser"}, Decision{MethodCert, 1}},
		{"hostnossl rule without TLS", Login{ip("10.9.9.9"), false, "db", "app"}, Decision{MethodReject, 2}},
		{"hostnossl rule skipped with TLS", Login{ip("10.9.9.9"), true, "db", "app"}, Decision{MethodMD5, 4}},
		{"single address and database list", Login{ip("10.1.2.3"), true, "audit", "anyone"}, Decision{MethodTrust, 3}},
		{"database not in list", Login{ip("10.1.2.3"), true, "other", "anyone"}, Decision{MethodSCRAM, 5}},
		{"IPv4-mapped IPv6 address", Login{ip("::ffff:10.1.2.3"), true, "reports", "x"}, Decision{MethodTrust, 3}},
		{"user list", Login{ip("10.200.0.1"), true, "db", "web"}, Decision{MethodMD5, 4}},
		{"address outside every CIDR, no TLS: no rule", Login{ip("192.168.1.1"), false, "db", "app"}, Decision{MethodReject, -1}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			if got := rules.Decide(test.login); got != test.want {
				t.Fatalf("Decide(%+v) = %+v, want %+v", test.login, got, test.want)
			}
		})
	}
	var none *Rules
	if got := none.Decide(Login{}); got != (Decision{MethodUser, -1}) {
		t.Fatalf("no rules: %+v, want the user's method", got)
	}
}
