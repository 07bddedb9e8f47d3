package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

// TestReadyNeedsAPrimaryAndAReadNode: ready needs a primary whose last poll
// answered and a node for reads (a standby within the limits, or the
// primary under when_no_standby: primary).
func TestReadyNeedsAPrimaryAndAReadNode(t *testing.T) {
	now := time.Now()
	primary := route.NodeState{Name: "pg1", Up: true, Role: route.RolePrimary, LagKnown: true, SampledAt: now, Timeline: 1}
	standby := route.NodeState{Name: "pg2", Up: true, Role: route.RoleStandby, LagKnown: true, Lag: 10 * time.Millisecond, SampledAt: now, Timeline: 1}
	lagging := standby
	lagging.Lag = time.Minute
	failed := primary
	failed.LastError = "poll: connection refused"
	down := primary
	down.Up = false
	pol := route.Policy{MaxReplicaLag: 5 * time.Second, DownAfter: time.Second}
	fallback := pol
	fallback.WhenNoStandby = route.UsePrimary
	for _, tc := range []struct {
		name       string
		nodes      []route.NodeState
		pol        route.Policy
		ready      bool
		reads, why string
	}{
		{"primary and standby", []route.NodeState{primary, standby}, pol, true, "pg2", ""},
		{"standby too far behind", []route.NodeState{primary, lagging}, pol, false, "", "REPLICA_LAG_EXCEEDED"},
		{"standby too far behind, fallback", []route.NodeState{primary, lagging}, fallback, true, "pg1", ""},
		{"primary's last poll failed", []route.NodeState{failed, standby}, pol, false, "", "did not answer its last poll"},
		{"primary down", []route.NodeState{down, standby}, pol, false, "", "no primary"},
		{"single node", []route.NodeState{primary}, pol, true, "pg1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Ready(&route.Snapshot{Nodes: tc.nodes, TakenAt: now}, tc.pol, now)
			if r.Ready != tc.ready || r.Reads != tc.reads || !strings.Contains(r.Why, tc.why) {
				t.Errorf("Ready = %+v, want ready=%v reads=%q why containing %q", r, tc.ready, tc.reads, tc.why)
			}
		})
	}
}
