package integration

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/proxy"
)

// TestAReloadAddingTheFirstAdminUsersIsRefused: the admin console exists only when pgowl starts
// with admin.listen or admin.users set. A reload that added the first admin users was accepted
// and logged as applied, yet those users had no console to log in to: their logins to the
// pgowl database went on to the nodes. Until the console can be started by a reload, such a
// reload is refused whole, naming admin.users, as a change to a key read only at start is.
func TestAReloadAddingTheFirstAdminUsersIsRefused(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Admin.Users, cfg.Admin.Listen = nil, "" })
	if o.inst.Admin != nil {
		t.Fatal("pgowl started with a console though neither admin.listen nor admin.users was set; the test's premise is gone")
	}
	cfg := o.cfg
	cfg.Admin.Users = []string{appUser}
	err := o.inst.Apply(cfg)
	var refused *proxy.ReloadError
	if !errors.As(err, &refused) || refused.Key != "admin.users" || !strings.Contains(refused.Reason, "restart") {
		t.Fatalf("a reload adding the first admin users: %v; want it refused, naming admin.users and a restart, as no console exists for them", err)
	}
	// The refusal is whole: the configuration in force is unchanged, and the session commands
	// stay open to every user, as they were.
	conn := o.connect(t, nil)
	if _, err := conn.Exec(timeoutCtx(t, statementTimeout), "SHOW pgowl.nodes"); err != nil {
		t.Errorf("SHOW pgowl.nodes after the refused reload: %v; want it open to every user, as before", err)
	}
}
