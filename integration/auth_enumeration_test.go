package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
)

// TestAuthChallengeDoesNotRevealUsers: with a SCRAM user and an md5 user
// configured, unknown users meet md5 or SCRAM, each name always the same, in
// the configured users' proportion, so that the md5 user's challenge does
// not tell it from an unknown name; a failed login is 28P01 whatever the
// user and the method. A trust user with a password is warned about at
// start-up.
func TestAuthChallengeDoesNotRevealUsers(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users,
			config.User{Name: "enum_md5", Password: "md5-pass", Auth: config.AuthMD5},
			config.User{Name: "enum_trust", Password: "ignored-for-clients", Auth: config.AuthTrust})
	})
	kind := func(msg pgproto3.BackendMessage) string {
		switch msg.(type) {
		case *pgproto3.AuthenticationMD5Password:
			return "md5"
		case *pgproto3.AuthenticationSASL:
			return "scram"
		default:
			return fmt.Sprintf("%T", msg)
		}
	}
	if got := kind(firstAuthRequest(t, o.addr, "enum_md5")); got != "md5" {
		t.Fatalf("the md5 user met %s", got)
	}
	seen := map[string]int{}
	const names = 60
	for i := range names {
		name := fmt.Sprintf("enum_nobody_%d", i)
		first := kind(firstAuthRequest(t, o.addr, name))
		if again := kind(firstAuthRequest(t, o.addr, name)); again != first {
			t.Errorf("%s met %s, then %s", name, first, again)
		}
		seen[first]++
	}
	t.Logf("%d unknown names met: %v (configured: one SCRAM, one md5 user)", names, seen)
	if seen["md5"] < names/6 || seen["scram"] < names/6 || seen["md5"]+seen["scram"] != names {
		t.Errorf("unknown users met %v; want md5 and SCRAM, each for about half of them", seen)
	}

	ctx := timeoutCtx(t, statementTimeout)
	for _, user := range []string{"enum_md5", appUser, "enum_nobody_1", "enum_nobody_2"} {
		cfg := o.connConfig(t, user, "wrong-password", &noticeLog{})
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			conn.Close(ctx)
			t.Errorf("%s logged in with a wrong password", user)
			continue
		}
		wantSQLState(t, user+" with a wrong password", err, "28P01")
	}

	warned := false
	for _, e := range o.logs.Entries(t) {
		if e["level"] == "warn" && e["user"] == "enum_trust" && strings.Contains(fmt.Sprint(e["message"]), "trust") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no start-up warning about the trust user with a password")
	}
}
