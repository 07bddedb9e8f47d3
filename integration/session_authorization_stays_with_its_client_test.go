package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// TestSessionStateSessionAuthorization: a superuser client changes its session user (SET SESSION
// AUTHORIZATION, or set_config('session_authorization', ...)). Another superuser client given the
// same (only) backend must run as itself, or wait.
func TestSessionStateSessionAuthorization(t *testing.T) {
	const superPassword = "review-secret"
	for _, tc := range []struct {
		name  string
		steps []string
	}{
		{"SetSessionAuthorization", []string{"SET SESSION AUTHORIZATION " + appUser}},
		{"SetConfigSessionAuthorization", []string{"SELECT set_config('session_authorization', '" + appUser + "', false)"}},
		{"SetSessionAuthorizationThenRole", []string{"SET SESSION AUTHORIZATION " + appUser, "SET ROLE review_state_role", "RESET ROLE"}},
		{"SetSessionAuthorizationInRolledBackTx", []string{"BEGIN", "SET SESSION AUTHORIZATION " + appUser, "ROLLBACK", "SET review_state.tenant = 'x'", "SET SESSION AUTHORIZATION " + appUser}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stateLeakSetup(t)
			o := rvStartOneBackend(t, func(cfg *config.Config) {
				cfg.Users = append(cfg.Users, config.User{Name: cluster.Superuser, Password: superPassword, Auth: config.AuthSCRAM})
			})
			ctx := timeoutCtx(t, statementTimeout)
			connect := func() *pgx.Conn {
				notices := &noticeLog{}
				cfg := o.connConfig(t, cluster.Superuser, superPassword, notices)
				cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
				conn, err := pgx.ConnectConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close(context.Background()) })
				return conn
			}
			a, b := connect(), connect()
			r3pExecAll(t, ctx, a.PgConn(), tc.steps...)
			bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got, err := rvQueryOne(bctx, b.PgConn(), "SELECT current_user || '/' || session_user")
			if rvSQLState(err) == "53300" {
				t.Logf("B waited: A's pin holds the backend")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := cluster.Superuser + "/" + cluster.Superuser; got != want {
				t.Errorf("after A ran %v, B (logged in as %s) runs as %s; want %s", tc.steps, cluster.Superuser, got, want)
			}
		})
	}
}
