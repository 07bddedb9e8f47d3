package integration

import (
	"testing"

	"github.com/pgowl/pgowl/config"
)

// TestARoleSetBySetConfigWithAParameterNameStaysWithItsClient: a client changes its role with
// set_config, the setting's name passed as a parameter (a generic "set this setting" helper does
// that: SELECT set_config($1, $2, false) with 'role'). On a direct connection only that client
// runs as the role. In transaction pooling the backend goes back to the pool after the
// statement; RESET ALL, which pgowl runs before another client's settings, leaves role alone
// (GUC_NO_RESET_ALL), so unless pgowl pins the session (as it does for SET ROLE and
// set_config('role', ...)) the next client on that backend runs as the other client's role.
func TestARoleSetBySetConfigWithAParameterNameStaysWithItsClient(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, "DROP ROLE IF EXISTS xp_tenant; CREATE ROLE xp_tenant NOLOGIN; GRANT xp_tenant TO "+appUser); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Pool.MaxPerNode = 1 // one backend per node: the clients share them
	})
	a := o.connect(t, nil)
	b := o.connect(t, nil)
	if _, err := a.Exec(ctx, "SELECT set_config($1, $2, false)", "role", "xp_tenant"); err != nil {
		t.Fatal(err)
	}
	var aUser string
	if err := a.QueryRow(ctx, "SELECT current_user::text").Scan(&aUser); err != nil {
		t.Fatal(err)
	}
	if aUser != "xp_tenant" {
		t.Errorf("client A runs as %q after its set_config of role, want xp_tenant: it lost its own change", aUser)
	}
	// Client B's reads, on any backend it is given. (A's change pins A to its backend, as SET
	// ROLE does; with one backend per node B cannot share that node with it, and its reads go
	// to the standby's.)
	for i := 0; i < 6; i++ {
		var user string
		if err := b.QueryRow(ctx, "SELECT current_user::text").Scan(&user); err != nil {
			t.Fatal(err)
		}
		if user != appUser {
			r := b.routes(t)
			t.Fatalf("client B (logged in as %s, never changed its role) runs as %q on %v: client A's set_config($1, $2, false) of role reached B through a shared backend", appUser, user, r)
		}
	}
}
