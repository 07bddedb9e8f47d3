package integration

import (
	"context"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// TestBackendsDialledBeforeAStandbyReplaysANewDefaultAreRetired: pgowl retires a database's
// pooled backends when the catalogue (read on the primary) finds a role's default search_path
// changed, and min_idle dials new ones at once. A standby that has not replayed the ALTER ROLE
// yet logs those new backends in under the OLD default; once it has replayed it, a new direct
// connection to it gets the new default. Sessions opened through pgowl after the standby caught
// up must run with the new default too (pgowl classifies them with it), wherever they are
// routed: no backend that logged in under the old default may serve them. pgowl retires the
// standby's backends again once the monitor sees its replay past the change
// (proxy/standby_defaults.go).
func TestBackendsDialledBeforeAStandbyReplaysANewDefaultAreRetired(t *testing.T) {
	t.Run("replay-paused", func(t *testing.T) { retireWithReplay(t, true) })
}

// TestBackendsOfAStandbyAreRetiredWhenANewDefaultIsSetPastPgowl: the control of the test
// above, the standbys replaying as usual.
func TestBackendsOfAStandbyAreRetiredWhenANewDefaultIsSetPastPgowl(t *testing.T) {
	retireWithReplay(t, false)
}

func retireWithReplay(t *testing.T, pause bool) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const role = "h2_u"
	roleWithDefaultSearchPath(t, ctx, c, role)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: role, Password: "secret", Auth: config.AuthSCRAM})
		cfg.Pool.MinIdle = 2
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	standbys := c.Nodes[1:]
	resume := resumeReplayAtCleanup(t, standbys)
	// Warm backends of the role on every node: several sessions read.
	readSearchPaths(t, ctx, roleSessions(t, o, role, 4), 3, true)

	for _, n := range standbys {
		if !pause {
			break
		}
		if err := n.PauseReplay(ctx); err != nil {
			t.Fatalf("pause replay on %s: %v", n.Name, err)
		}
	}
	moveRoleDefaultSearchPath(t, ctx, c, role)
	// pgowl's catalogue (read on the primary) finds the new default and retires the backends.
	waitForLogLine(t, o, "default settings changed")
	// min_idle refills while the standbys still serve the old default.
	time.Sleep(3 * time.Second)
	resume()
	catchUp(t, c)
	for _, n := range standbys {
		if got := directSearchPath(t, ctx, n, role); got != role+"_new, public" {
			t.Fatalf("oracle: a new direct connection to %s after replay: %q", n.Name, got)
		}
	}
	// Let the monitor see the standbys caught up again.
	o.waitRoles(t, initialRoles(c))
	time.Sleep(2 * time.Second)

	stale, seen := staleDefaultReads(t, ctx, o, role)
	t.Logf("new sessions after the standbys replayed the ALTER: %v", seen)
	if stale > 0 {
		t.Errorf("%d of 24 reads of sessions opened after the standbys replayed ALTER ROLE %s SET search_path ran on a backend with the old default (a new direct connection gets %s_new, public): %v", stale, role, role, seen)
	}
}

// resumeReplayAtCleanup returns what resumes replay on nodes (each bounded to 10 s), and makes
// the test's cleanup run it: a test that paused replay leaves the shared cluster replaying.
func resumeReplayAtCleanup(t *testing.T, nodes []*cluster.Node) func() {
	resume := func() {
		for _, n := range nodes {
			rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = n.ResumeReplay(rctx)
			rcancel()
		}
	}
	t.Cleanup(resume)
	return resume
}
