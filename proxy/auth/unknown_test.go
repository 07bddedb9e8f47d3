package auth

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// firstChallenge runs Authenticate for user with a client that gives up at
// once, and returns the first message the server sent.
func firstChallenge(t *testing.T, s *Store, user string) pgproto3.BackendMessage {
	t.Helper()
	c := &scriptedClient{answer: func(pgproto3.BackendMessage) ([]byte, error) { return nil, errClientGaveUp }}
	s.Authenticate(c, user, zeroReader{})
	if len(c.sent) == 0 {
		t.Fatalf("%s: no challenge sent", user)
	}
	return c.sent[0]
}

// TestUnknownUsersMeetTheConfiguredMethods: the challenge an unknown user
// meets does not single out the users of either method. With only SCRAM
// users (or only md5 users) every unknown user meets that method; with both,
// unknown users meet md5 in the md5 users' proportion, the same name always
// the same challenge; a failed md5 exchange of an unknown user looks like a
// wrong password.
func TestUnknownUsersMeetTheConfiguredMethods(t *testing.T) {
	mustCreds := func(user string, method Method) *Credentials {
		c, err := NewCredentials(user, "secret-"+user, method)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	isMD5 := func(msg pgproto3.BackendMessage) bool {
		_, ok := msg.(*pgproto3.AuthenticationMD5Password)
		return ok
	}
	countMD5 := func(s *Store, names int) int {
		n := 0
		for i := range names {
			if isMD5(firstChallenge(t, s, fmt.Sprintf("nobody_%d", i))) {
				n++
			}
		}
		return n
	}

	scramOnly := NewStore(mustCreds("a", MethodSCRAMSHA256), mustCreds("t", MethodTrust))
	if n := countMD5(scramOnly, 200); n != 0 {
		t.Errorf("SCRAM users only: %d of 200 unknown users met md5", n)
	}
	md5Only := NewStore(mustCreds("a", MethodMD5), mustCreds("t", MethodTrust))
	if n := countMD5(md5Only, 200); n != 200 {
		t.Errorf("md5 users only: %d of 200 unknown users met md5, want all", n)
	}
	if !isMD5(firstChallenge(t, md5Only, "a")) {
		t.Errorf("md5 user does not meet md5")
	}

	mixed := NewStore(mustCreds("a", MethodSCRAMSHA256), mustCreds("b", MethodSCRAMSHA256), mustCreds("c", MethodSCRAMSHA256), mustCreds("legacy", MethodMD5))
	const names = 4000
	n := countMD5(mixed, names)
	t.Logf("one md5 user of four: %d of %d unknown users met md5 (%.1f%%)", n, names, 100*float64(n)/names)
	if n < names/4-names/20 || n > names/4+names/20 {
		t.Errorf("one md5 user of four: %d of %d unknown users met md5, want about a quarter", n, names)
	}
	for i := range 50 {
		name := fmt.Sprintf("nobody_%d", i)
		if isMD5(firstChallenge(t, mixed, name)) != isMD5(firstChallenge(t, mixed, name)) {
			t.Errorf("%s met two different challenges", name)
		}
	}

	// A fake md5 exchange fails at the password, as a wrong one does.
	var md5Name string
	for i := 0; md5Name == ""; i++ {
		if name := fmt.Sprintf("nobody_%d", i); isMD5(firstChallenge(t, mixed, name)) {
			md5Name = name
		}
	}
	for _, user := range []string{md5Name, "legacy"} {
		c := &scriptedClient{answer: func(pgproto3.BackendMessage) ([]byte, error) {
			return []byte("md5" + md5Hex([]byte("guess")) + "\x00"), nil
		}}
		ae := authError(t, mixed.Authenticate(c, user, zeroReader{}))
		if ae.SQLState != "28P01" {
			t.Errorf("%s with a wrong md5 answer: %s %s, want 28P01", user, ae.SQLState, ae.Message)
		}
		want := ReasonWrongPassword
		if user == md5Name {
			want = ReasonUnknownUser
		}
		if ae.Reason != want {
			t.Errorf("%s: logged reason %q, want %q", user, ae.Reason, want)
		}
	}
}
