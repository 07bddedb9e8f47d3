package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestARoleDefaultSettingChangedUnderPooledBackendsReachesNewSessions: PostgreSQL applies the
// settings of ALTER ROLE and ALTER DATABASE ... SET when a backend logs in, so a pooled backend
// keeps those of its login. A session opened after the change, directly, starts with the new
// value; through pgowl it must too, on the primary and on the standbys, whatever the setting:
// statement_timeout changed through pgowl, then work_mem changed on the primary itself (found by
// the catalogue's change polls). pgowl replaces the database's pooled backends, and a standby's
// again once it has replayed the change (proxy/standby_defaults.go).
func TestARoleDefaultSettingChangedUnderPooledBackendsReachesNewSessions(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const role = "lds_u"
	o := startOwlWithRoleDefault(t, ctx, c, role)

	// shown has 4 new sessions of role read setting 3 times on a standby and once on the primary
	// (a row lock needs it), and returns how many of the 16 reads did not show want, with the
	// reads by node and value.
	shown := func(setting, want string) (wrong int, seen map[string]int) {
		t.Helper()
		seen = map[string]int{}
		for range 4 {
			s := roleSession(t, o, role)
			for i := range 4 {
				got, where := readRoleSetting(t, ctx, s, role, setting, i == 3)
				seen[where+" "+got]++
				if got != want {
					wrong++
				}
			}
		}
		return wrong, seen
	}
	// Warm backends of the role on every node, logged in with statement_timeout 41s.
	if wrong, seen := shown("statement_timeout", "41s"); wrong > 0 {
		t.Fatalf("before any change: %v", seen)
	}

	changes := func() int { return strings.Count(o.logs.String(), "default settings changed") }
	settle := func(what string, before int, setting, want string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); changes() == before; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Logf("%s: pgowl logged no change of default settings within 20 s", what)
				break
			}
		}
		catchUp(t, c)
		for _, n := range c.Nodes {
			if got := danDirectAs(t, n, role, "secret", "SELECT current_setting('"+setting+"')"); got != want {
				t.Fatalf("oracle: a new direct connection to %s after %s: %s = %q, want %q", n.Name, what, setting, got, want)
			}
		}
		o.waitRoles(t, initialRoles(c))
		time.Sleep(2 * time.Second) // the monitor sees the standbys past the change
		wrong, seen := shown(setting, want)
		t.Logf("new sessions after %s: %v", what, seen)
		if wrong > 0 {
			t.Errorf("%d of 16 reads of sessions opened after %s ran on a backend that logged in before it (a new direct connection shows %s = %s): %v",
				wrong, what, setting, want, seen)
		}
	}

	// Through pgowl: the role changes its own default.
	before := changes()
	changer := roleSession(t, o, role)
	if _, err := changer.Exec(ctx, "ALTER ROLE "+role+" SET statement_timeout = '42s'"); err != nil {
		t.Fatal(err)
	}
	settle("ALTER ROLE "+role+" SET statement_timeout through pgowl", before, "statement_timeout", "42s")

	// On the primary itself: the change polls find it.
	before = changes()
	if err := c.Nodes[0].Exec(ctx, "ALTER ROLE "+role+" SET work_mem = '5MB'"); err != nil {
		t.Fatal(err)
	}
	settle("ALTER ROLE "+role+" SET work_mem on the primary itself", before, "work_mem", "5MB")
}
