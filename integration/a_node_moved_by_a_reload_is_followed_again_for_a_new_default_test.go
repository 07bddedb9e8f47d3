package integration

import (
	"context"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// TestANodeMovedByAReloadIsFollowedAgainForANewDefault: a change of a role's default
// search_path is followed on the standbys (proxy/standby_defaults.go). pg2 replays it and is
// marked done. A reload then moves the name pg2 to another server (pg3's address, pg3 removed),
// a standby that has not replayed the change yet: its new backends log in under the old
// default. Once it has replayed the change, sessions opened through pgowl must get the new
// default, as a direct connection does.
func TestANodeMovedByAReloadIsFollowedAgainForANewDefault(t *testing.T) {
	c := sharedClusterFor(t)
	pg3 := c.Nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const role = "rv_mv_u"
	roleWithDefaultSearchPath(t, ctx, c, role)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: role, Password: "secret", Auth: config.AuthSCRAM})
		cfg.Pool.MinIdle = 2
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	resume := resumeReplayAtCleanup(t, []*cluster.Node{pg3})
	warm := roleSessions(t, o, role, 4)
	readSearchPaths(t, ctx, warm, 3, true)
	changeDefaultWhilePg3Lags(t, ctx, c, o, role)

	// The name pg2 moves to pg3's server, which has not replayed the change; pg3 is removed.
	pointPg2AtLaggingPg3(t, ctx, c, o, role, warm, resume)

	stale, seen := staleDefaultReads(t, ctx, o, role)
	t.Logf("sessions after the moved node replayed the ALTER: %v", seen)
	if stale > 0 {
		t.Errorf("%d of 24 reads ran on a backend with the old default after the server pg2 now names replayed the change: %v", stale, seen)
	}
}
