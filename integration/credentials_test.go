package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// createVerifierRole creates a login role with password on the primary and returns its SCRAM
// verifier as pg_authid stores it; the test then forgets the password as far as pgowl goes.
func createVerifierRole(t *testing.T, ctx context.Context, node interface {
	Exec(context.Context, string, ...any) error
	QueryRow(context.Context, string, ...any) pgx.Row
}, role, password string) string {
	t.Helper()
	for _, sql := range []string{
		"DROP TABLE IF EXISTS " + role + "_rows",
		"DROP ROLE IF EXISTS " + role,
		"SET password_encryption = 'scram-sha-256'; CREATE ROLE " + role + " LOGIN PASSWORD '" + password + "'",
		"CREATE TABLE " + role + "_rows (who text NOT NULL); GRANT SELECT, INSERT ON " + role + "_rows TO " + role,
	} {
		if err := node.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var verifier string
	if err := node.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role).Scan(&verifier); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(verifier, "SCRAM-SHA-256$") {
		t.Fatalf("%s's secret is %q, not a SCRAM verifier", role, verifier[:min(len(verifier), 16)])
	}
	return verifier
}

// loginAndWrite logs in to o as role with password, writes a row (primary) and reads it back
// (a standby once caught up, or the primary), proving statements run on the nodes.
func loginAndWrite(t *testing.T, ctx context.Context, o *owl, role, password string) {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, o.connConfig(t, role, password, &noticeLog{}))
	if err != nil {
		t.Fatalf("login as %s: %v", role, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO "+role+"_rows VALUES (current_user)"); err != nil {
		t.Fatalf("%s: INSERT through pgowl: %v", role, err)
	}
	var who string
	if err := conn.QueryRow(ctx, "/*pgowl:primary*/ SELECT who FROM "+role+"_rows LIMIT 1").Scan(&who); err != nil || who != role {
		t.Fatalf("%s: read back %q, %v", role, who, err)
	}
	var standbyUser string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&standbyUser); err != nil || standbyUser != role {
		t.Fatalf("%s: SELECT current_user on a standby = %q, %v", role, standbyUser, err)
	}
}

// TestCredentialsWithoutPlaintext logs users in whose password pgowl never saw: one from a users
// file of SCRAM verifiers, one found by the auth query on the primary. pgowl logs in to the nodes
// with SCRAM passthrough, and statements run there as the user.
func TestCredentialsWithoutPlaintext(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 2*time.Minute)
	primary := c.Nodes[0]

	t.Run("users_file", func(t *testing.T) {
		verifier := createVerifierRole(t, ctx, primary, "owl_from_file", "never-seen-by-pgowl-1")
		catchUp(t, c)
		file := filepath.Join(t.TempDir(), "userlist.txt")
		if err := os.WriteFile(file, []byte(`; written by the test`+"\n"+`"owl_from_file" "`+verifier+`"`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		o := startOwl(t, c, func(cfg *config.Config) { cfg.Auth.UsersFile = file })
		loginAndWrite(t, ctx, o, "owl_from_file", "never-seen-by-pgowl-1")
		_, err := pgx.ConnectConfig(ctx, o.connConfig(t, "owl_from_file", "a-guess", &noticeLog{}))
		wantSQLState(t, "users-file user with a wrong password", err, "28P01")
		if strings.Contains(o.logs.String(), "never-seen-by-pgowl") {
			t.Error("the password reached pgowl's log")
		}
	})

	t.Run("auth_query", func(t *testing.T) {
		createVerifierRole(t, ctx, primary, "owl_from_query", "never-seen-by-pgowl-2")
		catchUp(t, c)
		if err := primary.ResetStatementStats(ctx); err != nil {
			t.Fatal(err)
		}
		o := startOwl(t, c, func(cfg *config.Config) {
			cfg.Auth.QueryEnabled = true
			cfg.Auth.CacheTTL = time.Minute
		})
		loginAndWrite(t, ctx, o, "owl_from_query", "never-seen-by-pgowl-2")
		loginAndWrite(t, ctx, o, "owl_from_query", "never-seen-by-pgowl-2")
		_, err := pgx.ConnectConfig(ctx, o.connConfig(t, "owl_from_query", "a-guess", &noticeLog{}))
		wantSQLState(t, "auth-query user with a wrong password", err, "28P01")
		_, err = pgx.ConnectConfig(ctx, o.connConfig(t, "owl_nobody_at_all", "whatever", &noticeLog{}))
		wantSQLState(t, "a user the auth query does not find", err, "28P01")
		calls, err := primary.StatementCalls(ctx, "%pg_authid WHERE rolname%")
		if err != nil {
			t.Fatal(err)
		}
		// One lookup for owl_from_query (the later logins hit the cache), one for the unknown user.
		if calls != 2 {
			t.Errorf("the auth query ran %d times on the primary, want 2 (one per user within auth.cache_ttl)", calls)
		}
	})
}
