package route_test

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

// TestMayReadOnStandbyAgreesWithThePlan: the proxy gathers what only a read on a standby needs
// (pool room, the write position to read after) when MayReadOnStandby says so; it must say so
// exactly when Plan may send the unit to a standby.
func TestMayReadOnStandbyAgreesWithThePlan(t *testing.T) {
	node := func(name string, role route.Role, up bool) route.NodeState {
		return route.NodeState{Name: name, Addr: "127.0.0.1:5432", Up: up, Role: role, Timeline: 1,
			LagKnown: true, Lag: 10 * time.Millisecond, SampledAt: testNow.Add(-10 * time.Millisecond)}
	}
	withPrimary := &route.Snapshot{TakenAt: testNow, Nodes: []route.NodeState{node("pg1", route.RolePrimary, true), node("pg2", route.RoleStandby, true)}}
	withoutPrimary := &route.Snapshot{TakenAt: testNow, Nodes: []route.NodeState{node("pg1", route.RolePrimary, false), node("pg2", route.RoleStandby, true)}}
	read := route.Statement{Access: route.AccessRead, Reason: route.ReasonReadOnly, Subject: "SELECT", Statements: 1}
	write := route.Statement{Access: route.AccessWrite, Reason: route.ReasonWrite, Subject: "INSERT", Statements: 1}
	prepared := func(st route.Statement) route.Statement { st.Shape = route.ShapePrepareOnly; return st }
	pinned := func(st route.Statement) route.Statement { st.Pins = route.PinTempTable; return st }
	for _, tc := range []struct {
		name      string
		statement route.Statement
		session   route.SessionFacts
		snapshot  *route.Snapshot
		want      bool
	}{
		{"a read", read, route.SessionFacts{}, withPrimary, true},
		{"a write", write, route.SessionFacts{}, withPrimary, false},
		{"a prepare of a read", prepared(read), route.SessionFacts{}, withPrimary, true},
		{"a prepare of a write, with a primary", prepared(write), route.SessionFacts{}, withPrimary, false},
		{"a prepare of a write, without a primary", prepared(write), route.SessionFacts{}, withoutPrimary, true},
		{"a prepare of a write, with no primary backend free", prepared(write), route.SessionFacts{PrimaryFull: true}, withPrimary, true},
		{"a prepare of a write that will pin, without a primary", prepared(pinned(write)), route.SessionFacts{}, withoutPrimary, false},
		{"a read that pins", pinned(read), route.SessionFacts{}, withPrimary, false},
		{"a read in a session held on a node", read, route.SessionFacts{Held: route.HeldNode{Node: "pg1", Role: route.RolePrimary}}, withPrimary, false},
		{"a read in a session its settings keep on the primary", read, route.SessionFacts{PrimaryOnly: route.SerializableAtLogin}, withPrimary, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := route.PlanRequest{Statement: tc.statement, Session: tc.session, Snapshot: tc.snapshot, Now: testNow,
				Policy: route.Policy{MaxReplicaLag: 5 * time.Second, DownAfter: 3 * time.Second, StandbyChoice: route.LeastLag, WhenNoStandby: route.Reject}}
			if got := r.MayReadOnStandby(); got != tc.want {
				t.Errorf("MayReadOnStandby = %v, want %v", got, tc.want)
			}
			out, err := route.Plan(r)
			if err != nil {
				if tc.want {
					t.Errorf("Plan refused what may read on a standby: %v", err)
				}
				return // refused: it goes nowhere, a standby least of all
			}
			if onStandby := out.Decision.Role == route.RoleStandby; onStandby && !tc.want {
				t.Errorf("Plan sent it to standby %s although MayReadOnStandby says it may not", out.Decision.Node)
			} else if !onStandby && tc.want && tc.session.Held.Node == "" {
				t.Errorf("Plan sent it to %s (%s) although a standby qualifies", out.Decision.Node, out.Decision.Reason)
			}
		})
	}
}
