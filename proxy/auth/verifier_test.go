package auth

import (
	"strings"
	"testing"
)

// TestUserListVerifiers reads a users file and logs a user in with the password pgowl never saw.
func TestUserListVerifiers(t *testing.T) {
	made := mustSCRAMCredentials(t, "alice", "wonderland", []byte("0123456789abcdef"), SCRAMIterations)
	quoted := mustSCRAMCredentials(t, `o"brien`, "pw", []byte("fedcba9876543210"), 5000)
	file := "; comment\n# another\n\n" +
		`"alice" "` + made.Verifier() + `"` + "\n" +
		`  "o""brien"   "` + quoted.Verifier() + `"  ` + "\n"
	creds, err := ParseUserList(strings.NewReader(file), "userlist.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(creds) != 2 || creds[0].User() != "alice" || creds[1].User() != `o"brien` {
		t.Fatalf("parsed %d users: %v", len(creds), creds)
	}
	if creds[0].Verifier() != made.Verifier() || creds[1].Verifier() != quoted.Verifier() || !creds[0].FromVerifier() {
		t.Fatalf("verifiers do not round-trip")
	}
	store := NewStore(creds...)
	for _, attempt := range []struct {
		password string
		ok       bool
	}{{"wonderland", true}, {"looking-glass", false}} {
		client := &testSCRAMClient{password: attempt.password, gs2Header: "n,,", nonce: "nonce"}
		conn := &scriptedClient{answer: scramScript(saslInitialBody(SCRAMSHA256, client.clientFirst()), func(sf string) string {
			final, _ := client.clientFinal(t, sf)
			return final
		})}
		result, err := store.AuthenticateRequest(conn, Request{User: "alice"})
		if (err == nil) != attempt.ok {
			t.Fatalf("password %q: %v", attempt.password, err)
		}
		if attempt.ok && len(result.ClientKey) != 32 {
			t.Fatalf("no ClientKey for passthrough")
		}
	}

	for _, bad := range []string{
		`"alice" "plaintext"`,
		`"alice" "md5abcdef"`,
		`alice "` + made.Verifier() + `"`,
		`"alice" "` + made.Verifier(),
		`"alice"`,
		`"alice" "SCRAM-SHA-256$0:c2FsdA==$` + strings.Repeat("A", 44) + ":" + strings.Repeat("A", 44) + `"`,
		`"alice" "SCRAM-SHA-256$4096:c2FsdA==$short:short"`,
		`"alice" "` + made.Verifier() + `"` + "\n" + `"alice" "` + made.Verifier() + `"`,
	} {
		if _, err := ParseUserList(strings.NewReader(bad), "userlist.txt"); err == nil || !strings.Contains(err.Error(), "userlist.txt:") {
			t.Errorf("ParseUserList(%q) = %v, want an error naming the line", bad, err)
		}
	}
}
