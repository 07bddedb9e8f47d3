package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestARoleDefaultChangedWhileTheDatabaseIsUnusedReachesTheNextSession: the catalogue's change
// polls stop once a database has gone unused for a minute, while pool.min_idle keeps that
// database's backends logged in. An ALTER ROLE ... SET statement_timeout made on the primary
// meanwhile is then not found until a statement asks for the catalogue again, and the first
// session to arrive, however long after the change, runs on a backend that logged in under the
// old default: a new direct connection shows the new value.
func TestARoleDefaultChangedWhileTheDatabaseIsUnusedReachesTheNextSession(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const role = "ldi_u"
	o := startOwlWithRoleDefault(t, ctx, c, role)

	// Warm backends of the role on every node, logged in with statement_timeout 41s.
	for range 3 {
		s := roleSession(t, o, role)
		for i := range 4 {
			if got, where := readRoleSetting(t, ctx, s, role, "statement_timeout", i == 3); got != "41s" {
				t.Fatalf("before any change: %s on %s", got, where)
			}
		}
		s.Close(ctx)
	}

	// No statement for a minute: the polls stop, the pooled backends stay.
	const stopped = "not polled until the database is used again"
	for deadline := time.Now().Add(100 * time.Second); !strings.Contains(o.logs.String(), stopped); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the catalogue's polls did not stop within 100 s")
		}
	}

	if err := c.Nodes[0].Exec(ctx, "ALTER ROLE "+role+" SET statement_timeout = '43s'"); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	for _, n := range c.Nodes {
		if got := danDirectAs(t, n, role, "secret", "SELECT current_setting('statement_timeout')"); got != "43s" {
			t.Fatalf("oracle: a new direct connection to %s: statement_timeout = %q, want 43s", n.Name, got)
		}
	}
	time.Sleep(5 * time.Second) // five poll intervals, past the standbys' replay

	var wrong []string
	for i := range 3 {
		s := roleSession(t, o, role)
		if got, where := readRoleSetting(t, ctx, s, role, "statement_timeout", i == 2); got != "43s" {
			wrong = append(wrong, "session "+string(rune('1'+i))+" on "+where+": "+got)
		}
		s.Close(ctx)
	}
	// What a session opened once the use has woken the polls reads (for the report).
	time.Sleep(3 * time.Second)
	got, where := readRoleSetting(t, ctx, roleSession(t, o, role), role, "statement_timeout", false)
	t.Logf("a session opened 3 s after those: %s on %s; pgowl logged a change of default settings: %v",
		got, where, strings.Contains(o.logs.String(), "default settings changed"))
	if len(wrong) > 0 {
		t.Errorf("sessions opened 5 s after ALTER ROLE %s SET statement_timeout = '43s' (a new direct connection shows 43s) read the old default in their first statement: %v", role, wrong)
	}
}
