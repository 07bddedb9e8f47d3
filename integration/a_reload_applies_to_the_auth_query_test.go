package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
)

// TestAReloadAppliesToTheAuthQuery: a reload that changes auth.query_password (the lookup login's
// password rotated, as operators do), or the node list, applies to the auth query's next lookup.
// The auth query kept the configuration pgowl started with: after a rotation it logged in with
// the old password, and with a primary the reload added it dialled port 0; every login that
// needed a lookup failed until a restart.
//
// The lookup runs as a login that is not a superuser (the test cluster trusts the superuser over
// TCP, so its password would not matter), through a SECURITY DEFINER function, as PgBouncer's
// documentation advises for its auth_query.
func TestAReloadAppliesToTheAuthQuery(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 2*time.Minute)
	primary := c.Nodes[0]
	for _, sql := range []string{
		"DROP FUNCTION IF EXISTS public.owl_aq_lookup_fn(text)",
		"DROP ROLE IF EXISTS owl_aq_lookup",
		"SET password_encryption = 'scram-sha-256'; CREATE ROLE owl_aq_lookup LOGIN PASSWORD 'lookup-first'",
		`CREATE FUNCTION public.owl_aq_lookup_fn(wanted text) RETURNS TABLE (usename name, passwd text)
		 LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog
		 AS $$ SELECT rolname, rolpassword FROM pg_authid WHERE rolname = wanted AND rolcanlogin $$`,
		"REVOKE ALL ON FUNCTION public.owl_aq_lookup_fn(text) FROM PUBLIC",
		"GRANT EXECUTE ON FUNCTION public.owl_aq_lookup_fn(text) TO owl_aq_lookup",
	} {
		if err := primary.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	passwords := map[string]string{"owl_aq_one": "aq-one-secret", "owl_aq_two": "aq-two-secret", "owl_aq_three": "aq-three-secret"}
	for _, role := range []string{"owl_aq_one", "owl_aq_two", "owl_aq_three"} {
		createVerifierRole(t, ctx, primary, role, passwords[role])
	}
	catchUp(t, c)
	withAuthQuery := func(cfg *config.Config) {
		cfg.Auth.QueryEnabled = true
		cfg.Auth.Query = "SELECT usename, passwd FROM public.owl_aq_lookup_fn($1)"
		cfg.Auth.QueryUser = "owl_aq_lookup"
		cfg.Auth.QueryPassword = "lookup-first"
		cfg.Auth.QueryDatabase = appDatabase
	}

	t.Run("rotated_query_password", func(t *testing.T) {
		o := startOwl(t, c, withAuthQuery)
		loginAndWrite(t, ctx, o, "owl_aq_one", passwords["owl_aq_one"])
		if err := primary.Exec(ctx, "SET password_encryption = 'scram-sha-256'; ALTER ROLE owl_aq_lookup PASSWORD 'lookup-second'"); err != nil {
			t.Fatal(err)
		}
		catchUp(t, c)
		cfg := o.cfg
		cfg.Auth.QueryPassword = "lookup-second"
		if err := o.inst.Apply(cfg); err != nil {
			t.Fatalf("reload with the rotated auth.query_password: %v", err)
		}
		// A user not looked up before (the cache does not answer for it).
		loginAndWrite(t, ctx, o, "owl_aq_two", passwords["owl_aq_two"])
	})

	t.Run("primary_added_by_a_reload", func(t *testing.T) {
		if err := primary.Exec(ctx, "SET password_encryption = 'scram-sha-256'; ALTER ROLE owl_aq_lookup PASSWORD 'lookup-first'"); err != nil {
			t.Fatal(err)
		}
		catchUp(t, c)
		o := startOwlNoWait(t, c, func(cfg *config.Config) {
			withAuthQuery(cfg)
			cfg.Nodes = slices.DeleteFunc(cfg.Nodes, func(n config.Node) bool { return n.Name == primary.Name })
		})
		o.waitSnapshot(t, 10*time.Second, "the standbys up", func(s *route.Snapshot) bool {
			for _, standby := range c.Nodes[1:] {
				if n := findNode(s, standby.Name); n == nil || !n.Up || n.Role != route.RoleStandby {
					return false
				}
			}
			return true
		})
		cfg := o.cfg
		cfg.Nodes = nil
		for _, n := range c.Nodes {
			cfg.Nodes = append(cfg.Nodes, config.Node{Name: n.Name, Host: n.Host, Port: n.Port})
		}
		if err := o.inst.Apply(cfg); err != nil {
			t.Fatalf("reload adding the primary %s: %v", primary.Name, err)
		}
		o.states = o.inst.Nodes()
		o.waitRoles(t, initialRoles(c))
		loginAndWrite(t, ctx, o, "owl_aq_three", passwords["owl_aq_three"])
	})
}
