package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestAReloadReadsTheUsersFileAgain: auth.users_file is read again at each reload, as PgBouncer
// reads its auth_file at RELOAD: a user added to the file logs in after the reload without a
// restart, and one taken out of it is refused (28P01) as an unknown user is, while the sessions
// already logged in go on.
func TestAReloadReadsTheUsersFileAgain(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 2*time.Minute)
	first := createVerifierRole(t, ctx, c.Nodes[0], "owl_file_first", "first-secret")
	second := createVerifierRole(t, ctx, c.Nodes[0], "owl_file_second", "second-secret")
	catchUp(t, c)
	file := filepath.Join(t.TempDir(), "userlist.txt")
	write := func(user, verifier string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(`"`+user+`" "`+verifier+`"`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("owl_file_first", first)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Auth.UsersFile = file })
	loginAndWrite(t, ctx, o, "owl_file_first", "first-secret")
	kept, err := pgx.ConnectConfig(ctx, o.connConfig(t, "owl_file_first", "first-secret", &noticeLog{}))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close(ctx)
	_, err = pgx.ConnectConfig(ctx, o.connConfig(t, "owl_file_second", "second-secret", &noticeLog{}))
	wantSQLState(t, "a user not yet in the users file", err, "28P01")

	write("owl_file_second", second)
	if err := o.inst.Apply(o.cfg); err != nil {
		t.Fatalf("reload: %v", err)
	}
	loginAndWrite(t, ctx, o, "owl_file_second", "second-secret")
	_, err = pgx.ConnectConfig(ctx, o.connConfig(t, "owl_file_first", "first-secret", &noticeLog{}))
	wantSQLState(t, "a user taken out of the users file, after the reload", err, "28P01")
	var one int
	if err := kept.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("a session logged in before the reload: %v", err)
	}
}
