package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// TestANameMovedAfterANewDefaultWasReplayedEverywhereIsFollowed: pgowl starts with pg1 and pg2
// only. A role's default search_path changes while pg3 (outside pgowl's configuration) has its
// replay paused; pg2 replays the change, so every node pgowl knows has replayed it. A reload then
// points the name pg2 at pg3's server, which has not replayed the change: min_idle and sessions
// log in there under the old default. Once pg3 has replayed the change, sessions opened through
// pgowl must get the new default, as a direct connection does (proxy/standby_defaults.go keeps
// the change for servers that come later). A reload that adds a lagging standby is the same case.
func TestANameMovedAfterANewDefaultWasReplayedEverywhereIsFollowed(t *testing.T) {
	c := sharedClusterFor(t)
	pg3 := c.Nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const role = "rv_add_u"
	roleWithDefaultSearchPath(t, ctx, c, role)
	o := startOwlNoWait(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: role, Password: "secret", Auth: config.AuthSCRAM})
		cfg.Pool.MinIdle = 2
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
		cfg.Nodes = slices.DeleteFunc(cfg.Nodes, func(n config.Node) bool { return n.Name == pg3.Name })
	})
	o.waitRoles(t, map[string]route.Role{c.Nodes[0].Name: route.RolePrimary, c.Nodes[1].Name: route.RoleStandby})
	resume := resumeReplayAtCleanup(t, []*cluster.Node{pg3})
	warm := roleSessions(t, o, role, 4)
	readSearchPaths(t, ctx, warm, 3, true)
	changeDefaultWhilePg3Lags(t, ctx, c, o, role)
	time.Sleep(time.Second) // a few more snapshots: every node listed has replayed it

	// The reload points pg2 at pg3's server, which has not replayed the change.
	pointPg2AtLaggingPg3(t, ctx, c, o, role, warm, resume)

	stale, seen := staleDefaultReads(t, ctx, o, role)
	t.Logf("sessions after pg3's server, which pg2 now names, replayed the ALTER: %v", seen)
	if stale > 0 {
		t.Errorf("%d of 24 reads ran on a backend with the old default after the server pg2 now names replayed the change: %v", stale, seen)
	}
}
