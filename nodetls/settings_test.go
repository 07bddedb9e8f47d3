package nodetls

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestConnStringAppliesTheMode parses the rendered string with pgconn, as the pool, the monitor and the
// catalogue loader do, and checks the TLS each mode leads to.
func TestConnStringAppliesTheMode(t *testing.T) {
	tests := []struct {
		mode          string
		wantTLSFirst  bool
		wantFallbacks int
		wantVerify    bool
	}{
		{"disable", false, 0, false},
		{"prefer", true, 1, false},
		{"require", true, 0, false},
		{"verify-ca", true, 0, true},
		{"verify-full", true, 0, true},
	}
	for _, test := range tests {
		t.Run(test.mode, func(t *testing.T) {
			s := Settings{SSLMode: test.mode}
			cfg, err := pgconn.ParseConfig(s.ConnString(Param{Key: "host", Value: "127.0.0.1"}, Param{Key: "port", Value: "5432"}, Param{Key: "user", Value: "o'neil"}))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.User != "o'neil" {
				t.Errorf("user %q, want o'neil", cfg.User)
			}
			if (cfg.TLSConfig != nil) != test.wantTLSFirst {
				t.Errorf("TLS on the first attempt: %v, want %v", cfg.TLSConfig != nil, test.wantTLSFirst)
			}
			if len(cfg.Fallbacks) != test.wantFallbacks {
				t.Errorf("%d fallbacks, want %d", len(cfg.Fallbacks), test.wantFallbacks)
			}
			if cfg.TLSConfig != nil && cfg.TLSConfig.InsecureSkipVerify == (test.mode == "verify-full") && test.mode == "verify-full" {
				t.Errorf("verify-full skips verification")
			}
			if test.wantVerify && cfg.TLSConfig.VerifyPeerCertificate == nil && cfg.TLSConfig.InsecureSkipVerify {
				t.Errorf("%s does not verify the node's certificate", test.mode)
			}
		})
	}
	if got := (Settings{}).Params()[0]; got != (Param{Key: "sslmode", Value: "prefer"}) {
		t.Errorf("zero Settings give %v, want sslmode=prefer", got)
	}
}
