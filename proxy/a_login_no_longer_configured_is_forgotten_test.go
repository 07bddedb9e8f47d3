package proxy

import (
	"testing"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/auth"
)

// TestALoginNoLongerConfiguredIsForgotten: which of the pool's remembered logins a reload keeps
// (loginStillConfigured): those whose user is still configured with the same secret.
func TestALoginNoLongerConfiguredIsForgotten(t *testing.T) {
	const verifier = "SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0$" +
		"dGhpcyBpcyBub3QgYSByZWFsIHN0b3JlZCBrZXkgISE=:dGhpcyBpcyBub3QgYSByZWFsIHNlcnZlciBrZXkgISE="
	fromFile, err := auth.NewVerifierCredentials("filed", verifier)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{Users: []config.User{{Name: "app", Password: "secret"}, {Name: "trusted", Auth: config.AuthTrust}}}
	trusted, err := auth.NewCredentials("trusted", "", auth.MethodTrust)
	if err != nil {
		t.Fatal(err)
	}
	creds := []*auth.Credentials{fromFile, trusted}
	keys := &pool.SCRAMKeys{ServerKey: fromFile.ServerKey()}
	for _, tc := range []struct {
		what      string
		login     pool.Login
		authQuery bool
		want      bool
	}{
		{"a user listed with the same password", pool.Login{User: "app", Password: "secret"}, false, true},
		{"a user listed with another password", pool.Login{User: "app", Password: "old"}, false, false},
		{"a user no longer listed", pool.Login{User: "gone", Password: "secret"}, false, false},
		{"a users-file user with the same verifier", pool.Login{User: "filed", SCRAM: keys}, false, true},
		{"a users-file user whose verifier changed", pool.Login{User: "filed", SCRAM: &pool.SCRAMKeys{}}, false, false},
		{"a verifier user in no list, without the auth query", pool.Login{User: "queried", SCRAM: keys}, false, false},
		{"a verifier user in no list, with the auth query", pool.Login{User: "queried", SCRAM: keys}, true, true},
		{"a listed user without a secret", pool.Login{User: "trusted"}, false, true},
		{"an unlisted user without a secret, without the auth query", pool.Login{User: "stranger"}, false, false},
		{"an unlisted user without a secret (trust or cert), with the auth query", pool.Login{User: "stranger"}, true, true},
	} {
		cfg := cfg
		cfg.Auth.QueryEnabled = tc.authQuery
		if got := loginStillConfigured(cfg, creds, tc.login); got != tc.want {
			t.Errorf("%s: kept %v, want %v", tc.what, got, tc.want)
		}
	}
}
