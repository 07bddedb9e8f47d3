package proxy

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/route"
)

// TestNodeRefusalOfLoginByCode checks which backend login errors mean "this
// node cannot serve this login now" rather than the client's own error.
func TestNodeRefusalOfLoginByCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want nodeLoginRefusal
	}{
		{&pgconn.PgError{Severity: "FATAL", Code: "28P01"}, nodeLoginNotReplayed},
		{&pgconn.PgError{Severity: "FATAL", Code: "28000"}, nodeLoginNotReplayed},
		{fmt.Errorf("dial pg2: %w", &pgconn.PgError{Severity: "FATAL", Code: "3D000"}), nodeLoginNotReplayed},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P03"}, nodeLoginNotAccepting},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P01"}, nodeLoginNotAccepting}, // a stop ended the login
		{&pgconn.PgError{Severity: "FATAL", Code: "57P02"}, nodeLoginNotAccepting},
		{&pgconn.PgError{Severity: "FATAL", Code: "53300"}, nodeLoginAccepted},
		{errors.New("connection refused"), nodeLoginAccepted},
		{nil, nodeLoginAccepted},
	} {
		if got := nodeRefusalOfLogin(c.err); got != c.want {
			t.Errorf("%v: got %d, want %d", c.err, got, c.want)
		}
	}
}

// TestNodeLoginRefusalsExpireAndStayBounded checks that a refusal is
// remembered per (node, user, database) on standbys only, until its time is
// up, the standby replayed the position it lacked, or a login there succeeds, and that the table never outgrows its bound.
func TestNodeLoginRefusalsExpireAndStayBounded(t *testing.T) {
	snap := &route.Snapshot{Nodes: []route.NodeState{
		{Name: "pg1", Role: route.RolePrimary}, {Name: "pg2", Role: route.RoleStandby}, {Name: "pg3", Role: route.RoleStandby}}}
	var m nodeLoginRefusals
	now := time.Now()
	if got := m.refusedMask(snap, "u", "db", now); got != 0 {
		t.Fatalf("empty memory refuses %b", got)
	}
	m.remember(nodeLoginKey{"pg2", "u", "db"}, nodeLoginRefused{until: now.Add(time.Second)}, now)
	m.remember(nodeLoginKey{"pg1", "u", "db"}, nodeLoginRefused{until: now.Add(time.Second)}, now) // a primary's refusal is never a mask bit
	if got := m.refusedMask(snap, "u", "db", now); got != 1<<1 {
		t.Fatalf("mask %b, want pg2 only", got)
	}
	if got := m.refusedMask(snap, "other", "db", now); got != 0 {
		t.Fatalf("another user's mask %b, want none", got)
	}
	if got := m.refusedMask(snap, "u", "otherdb", now); got != 0 {
		t.Fatalf("another database's mask %b, want none", got)
	}
	if got := m.refusedMask(snap, "u", "db", now.Add(time.Second)); got != 0 {
		t.Fatalf("an expired refusal still holds: %b", got)
	}
	m.remember(nodeLoginKey{"pg3", "u", "db"}, nodeLoginRefused{until: now.Add(time.Second)}, now)
	m.forget(nodeLoginKey{"pg3", "u", "db"})
	if got := m.refusedMask(snap, "u", "db", now); got != 0 {
		t.Fatalf("a refusal forgotten after a login still holds: %b", got)
	}
	// A refusal tied to the primary's position ends once the standby's
	// replay position reaches it, before its time is up.
	m.remember(nodeLoginKey{"pg2", "u", "db"}, nodeLoginRefused{until: now.Add(time.Minute), replayPast: 0x3000}, now)
	snap.Nodes[1].WALPosition = 0x2fff
	if got := m.refusedMask(snap, "u", "db", now); got != 1<<1 {
		t.Fatalf("a standby short of the position is not kept from the login: %b", got)
	}
	snap.Nodes[1].WALPosition = 0x3000
	if got := m.refusedMask(snap, "u", "db", now); got != 0 {
		t.Fatalf("a standby that replayed the position is still kept from the login: %b", got)
	}
	snap.Nodes[1].WALPosition = 0
	// The bound: expired entries make room; live ones do not.
	for i := 0; i < 2*maxNodeLoginRefusals; i++ {
		m.remember(nodeLoginKey{"pg2", "user" + strconv.Itoa(i), "db"}, nodeLoginRefused{until: now.Add(time.Second)}, now)
		if m.len() > maxNodeLoginRefusals {
			t.Fatalf("%d refusals remembered, bound %d", m.len(), maxNodeLoginRefusals)
		}
	}
	later := now.Add(2 * time.Second)
	m.remember(nodeLoginKey{"pg2", "u", "db"}, nodeLoginRefused{until: later.Add(time.Second)}, later)
	if got := m.refusedMask(snap, "u", "db", later); got != 1<<1 {
		t.Fatalf("a refusal after the others expired is not remembered: %b", got)
	}
	if m.len() != 1 {
		t.Fatalf("expired refusals not dropped when the table was full: %d left, want 1", m.len())
	}
}
