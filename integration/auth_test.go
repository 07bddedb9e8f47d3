package integration

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
)

// firstAuthRequest opens a raw connection, sends a startup packet for user and
// returns pgowl's first answer: the authentication request it makes, or an error.
func firstAuthRequest(t *testing.T, addr, user string) pgproto3.BackendMessage {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial pgowl: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": user, "database": appDatabase}})
	if err := fe.Flush(); err != nil {
		t.Fatalf("send startup packet: %v", err)
	}
	msg, err := fe.Receive()
	if err != nil {
		t.Fatalf("read pgowl's answer to the startup packet for %q: %v", user, err)
	}
	return msg
}

// TestAuth checks that a wrong password and an unknown user are refused alike,
// and that md5 and trust users configured in pgowl can log in.
func TestAuth(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, time.Minute)
	primary := c.Nodes[0]
	for _, sql := range []string{
		"DROP ROLE IF EXISTS owl_md5",
		"DROP ROLE IF EXISTS owl_trust",
		"CREATE ROLE owl_md5 LOGIN PASSWORD 'md5-pass'",
		"CREATE ROLE owl_trust LOGIN PASSWORD 'trust-pass'",
	} {
		if err := primary.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	createTable(t, c, "t9_logins", "CREATE TABLE t9_logins (who text NOT NULL); GRANT SELECT, INSERT ON t9_logins TO owl_md5, owl_trust")

	t.Run("wrong_password_and_unknown_user_look_alike", func(t *testing.T) {
		o := startOwl(t, c, nil)
		attempt := func(user, password string) (message, detail, hint string) {
			t.Helper()
			cfg := o.connConfig(t, user, password, &noticeLog{})
			connCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			conn, err := pgx.ConnectConfig(connCtx, cfg)
			if err == nil {
				conn.Close(ctx)
				t.Fatalf("%s with password %q logged in, want a refusal", user, password)
			}
			pgErr := wantSQLState(t, "login as "+user, err, "28P01")
			if pgErr == nil {
				return "", "", ""
			}
			if pgErr.Severity != "FATAL" {
				t.Errorf("login as %s: severity %s, want FATAL", user, pgErr.Severity)
			}
			return strings.ReplaceAll(pgErr.Message, user, "<user>"), pgErr.Detail, pgErr.Hint
		}
		wrongMsg, wrongDetail, wrongHint := attempt(appUser, "not-the-password")
		unknownMsg, unknownDetail, unknownHint := attempt("nobody_here", appPassword)
		if wrongMsg != unknownMsg || wrongDetail != unknownDetail || wrongHint != unknownHint {
			t.Errorf("refusals differ:\n wrong password: %q / %q / %q\n unknown user:   %q / %q / %q",
				wrongMsg, wrongDetail, wrongHint, unknownMsg, unknownDetail, unknownHint)
		}
		if !strings.Contains(wrongMsg, "<user>") {
			t.Errorf("refusal %q does not name the user", wrongMsg)
		}
		// An unknown user must be asked for SCRAM like a known one, so the
		// exchange itself does not tell whether the user exists.
		for _, user := range []string{appUser, "nobody_here"} {
			msg := firstAuthRequest(t, o.addr, user)
			sasl, ok := msg.(*pgproto3.AuthenticationSASL)
			if !ok {
				t.Errorf("startup as %s: pgowl answered %T, want AuthenticationSASL", user, msg)
				continue
			}
			if !containsString(sasl.AuthMechanisms, "SCRAM-SHA-256") {
				t.Errorf("startup as %s: mechanisms %v lack SCRAM-SHA-256", user, sasl.AuthMechanisms)
			}
		}
		// The instance keeps serving after refusals.
		conn := o.connect(t, nil)
		if got := queryInt(t, conn, "after refusals", "SELECT 7"); got != 7 {
			t.Errorf("SELECT 7 returned %d", got)
		}
	})

	t.Run("md5_and_trust_users", func(t *testing.T) {
		o := startOwl(t, c, func(cfg *config.Config) {
			cfg.Users = append(cfg.Users,
				config.User{Name: "owl_md5", Password: "md5-pass", Auth: config.AuthMD5},
				config.User{Name: "owl_trust", Password: "trust-pass", Auth: config.AuthTrust})
		})
		if _, ok := firstAuthRequest(t, o.addr, "owl_md5").(*pgproto3.AuthenticationMD5Password); !ok {
			t.Errorf("owl_md5 is not asked for an MD5 password")
		}
		if _, ok := firstAuthRequest(t, o.addr, "owl_trust").(*pgproto3.AuthenticationOk); !ok {
			t.Errorf("owl_trust is not let in without a password")
		}
		for _, login := range []struct{ user, password string }{
			{"owl_md5", "md5-pass"},
			{"owl_trust", ""},
		} {
			notices := &noticeLog{}
			cfg := o.connConfig(t, login.user, login.password, notices)
			cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol // one routed unit per statement
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Errorf("log in as %s: %v", login.user, err)
				continue
			}
			cl := &client{Conn: conn, notices: notices}
			var who string
			if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != login.user {
				t.Errorf("%s: read current_user = %q, %v", login.user, who, err)
			}
			wantRoute(t, login.user+" read", cl.oneRoute(t, login.user+" read"), "standby", "")
			if err := conn.QueryRow(ctx, "INSERT INTO t9_logins VALUES (current_user) RETURNING who").Scan(&who); err != nil || who != login.user {
				t.Errorf("%s: write returned %q, %v", login.user, who, err)
			}
			wantRoute(t, login.user+" write", cl.oneRoute(t, login.user+" write"), "primary", "WRITE")
			conn.Close(ctx)
		}
		cfg := o.connConfig(t, "owl_md5", "wrong", &noticeLog{})
		if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
			conn.Close(ctx)
			t.Errorf("owl_md5 logged in with a wrong password")
		} else {
			wantSQLState(t, "owl_md5 with a wrong password", err, "28P01")
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t9_logins WHERE who IN ('owl_md5', 'owl_trust')"); got != 2 {
			t.Errorf("the primary holds %d of the 2 rows the md5 and trust users wrote", got)
		}
	})
}

func containsString(list []string, s string) bool {
	for _, item := range list {
		if item == s {
			return true
		}
	}
	return false
}
