package integration

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
)

// fromAddress makes a client connect from the given loopback address.
func fromAddress(ip string) func(*pgx.ConnConfig) {
	return func(cfg *pgx.ConnConfig) {
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		cfg.DialFunc = dialer.DialContext
	}
}

// TestAccessRules checks that every kind of access rule (address, TLS or not, database, user,
// and each method) admits and refuses as written, and that a login no rule matches is refused.
func TestAccessRules(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, time.Minute)
	for _, sql := range []string{
		"DROP ROLE IF EXISTS owl_access",
		"CREATE ROLE owl_access LOGIN PASSWORD 'access-pass'",
	} {
		if err := c.Nodes[0].Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	// The role is dropped and created again on the primary. A login that
	// reads runs on a standby, which refuses it until it has replayed the role.
	catchUp(t, c)
	files := newClientTLSFiles(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		files.withClientTLS(config.ClientTLSPrefer)(cfg)
		cfg.Users = append(cfg.Users, config.User{Name: "owl_access", Password: "access-pass", Auth: config.AuthSCRAM})
		cfg.Access.Rules = []config.AccessRule{
			{Type: "host", Address: "127.0.0.2/32", Database: "all", User: "all", Method: "reject"},            // 0
			{Type: "host", Address: "127.0.0.3", Database: "all", User: appUser, Method: "trust"},              // 1
			{Type: "host", Address: "all", Database: "template1", User: "owl_access", Method: "scram-sha-256"}, // 2
			{Type: "hostssl", Address: "all", Database: "all", User: "owl_access", Method: "trust"},            // 3
			{Type: "hostnossl", Address: "all", Database: "all", User: "owl_access", Method: "reject"},         // 4
			{Type: "hostssl", Address: "127.0.0.4/32", Database: "all", User: appUser, Method: "cert"},         // 5
			{Type: "host", Address: "127.0.0.0/8", Database: appDatabase, User: appUser, Method: "md5"},        // 6
			{Type: "host", Address: "all", Database: "other_db,third_db", User: "all", Method: "reject"},       // 7
		}
		cfg.Admin.Users = []string{appUser}
	})
	plain := url.Values{"sslmode": {"disable"}}
	tlsParams := files.verifyFull(nil)
	tests := []struct {
		name, user, password, database string
		params                         url.Values
		adjust                         func(*pgx.ConnConfig)
		wantState                      string // "" admits
		wantMessage                    string
	}{
		{name: "address rule rejects 127.0.0.2", user: appUser, password: appPassword, params: plain, adjust: fromAddress("127.0.0.2"),
			wantState: "28000", wantMessage: "access.rules[0] rejects"},
		{name: "single-address rule trusts 127.0.0.3", user: appUser, params: plain, adjust: fromAddress("127.0.0.3")},
		{name: "hostssl rule trusts owl_access over TLS", user: "owl_access", params: tlsParams},
		{name: "hostnossl rule rejects owl_access without TLS", user: "owl_access", password: "access-pass", params: plain,
			wantState: "28000", wantMessage: "access.rules[4] rejects"},
		{name: "cert rule admits the certificate naming the user", user: appUser, params: files.verifyFull(&files.app), adjust: fromAddress("127.0.0.4")},
		{name: "cert rule refuses a certificate naming another user", user: appUser, password: appPassword, params: files.verifyFull(&files.mallory),
			adjust: fromAddress("127.0.0.4"), wantState: "28000", wantMessage: "certificate authentication failed"},
		{name: "cert rule refuses a client without a certificate", user: appUser, password: appPassword, params: tlsParams,
			adjust: fromAddress("127.0.0.4"), wantState: "28000", wantMessage: "certificate authentication failed"},
		{name: "md5 rule admits the right password", user: appUser, password: appPassword, params: plain},
		{name: "md5 rule refuses a wrong password", user: appUser, password: "wrong", params: plain, wantState: "28P01"},
		{name: "database list rule rejects", user: appUser, password: appPassword, database: "third_db", params: plain,
			wantState: "28000", wantMessage: "access.rules[7] rejects"},
		{name: "database rule admits with scram", user: "owl_access", password: "access-pass", database: "template1", params: plain},
		{name: "database rule refuses a wrong password", user: "owl_access", password: "wrong", database: "template1", params: plain, wantState: "28P01"},
		{name: "no rule matches", user: appUser, password: appPassword, database: "template1", params: plain,
			wantState: "28000", wantMessage: "no access rule admits"},
	}
	for _, test := range tests {
		t.Run(strings.ReplaceAll(test.name, " ", "_"), func(t *testing.T) {
			database := test.database
			if database == "" {
				database = appDatabase
			}
			cfg, err := pgx.ParseConfig(o.dsn(test.user, test.password, database, test.params))
			if err != nil {
				t.Fatal(err)
			}
			if test.adjust != nil {
				test.adjust(cfg)
			}
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if test.wantState == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				defer conn.Close(ctx)
				mustRun(t, conn, test.name)
				return
			}
			if err == nil {
				conn.Close(ctx)
				t.Fatal("admitted, want a refusal")
			}
			if pgErr := wantSQLState(t, test.name, err, test.wantState); pgErr != nil && !strings.Contains(pgErr.Message, test.wantMessage) {
				t.Errorf("refusal %q does not contain %q", pgErr.Message, test.wantMessage)
			}
		})
	}
	t.Run("md5_rule_replaces_the_users_scram", func(t *testing.T) {
		if _, ok := firstAuthRequest(t, o.addr, appUser).(*pgproto3.AuthenticationMD5Password); !ok {
			t.Errorf("%s, configured for SCRAM, is not asked for MD5 by access.rules[6]", appUser)
		}
	})
}

// TestAdminCommandsOnlyForAdminUsers checks that SHOW pgowl.nodes and SHOW pgowl.explain answer
// the users in admin.users and refuse the others with 42501, while session settings stay open.
func TestAdminCommandsOnlyForAdminUsers(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, time.Minute)
	for _, sql := range []string{
		"DROP ROLE IF EXISTS owl_not_admin",
		"CREATE ROLE owl_not_admin LOGIN PASSWORD 'plain-user'",
	} {
		if err := c.Nodes[0].Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	// The role is created on the primary; a read of the user may run on a
	// standby, whose login of the user fails (28P01) until it has replayed it.
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: "owl_not_admin", Password: "plain-user", Auth: config.AuthSCRAM})
		cfg.Admin.Users = []string{appUser}
	})
	admin := o.connect(t, nil)
	other, err := pgx.ConnectConfig(ctx, o.connConfig(t, "owl_not_admin", "plain-user", &noticeLog{}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	for _, command := range []string{"SHOW pgowl.nodes", "SHOW pgowl.explain"} {
		rows, err := admin.Query(ctx, command)
		if err != nil {
			t.Fatalf("%s as an admin: %v", command, err)
		}
		count := 0
		for rows.Next() {
			count++
		}
		if rows.Err() != nil || count == 0 {
			t.Errorf("%s as an admin: %d rows, %v", command, count, rows.Err())
		}
		_, err = other.Exec(ctx, command)
		wantSQLState(t, command+" as a user not in admin.users", err, "42501")
	}
	var notice string
	if err := other.QueryRow(ctx, "SHOW pgowl.notice").Scan(&notice); err != nil {
		t.Errorf("SHOW pgowl.notice, a session setting, is refused to a user not in admin.users: %v", err)
	}
	mustRun(t, other, "after a refused admin command")
}
