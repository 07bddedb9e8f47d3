package proxy

import (
	"testing"

	"github.com/pgowl/pgowl/pool"
)

// TestSessionLoginsMostUsedFirst: the logins a reload warms an added node
// for are the logged-in sessions' own, each once, those most sessions use
// first (Pool.Warm dials only the first few).
func TestSessionLoginsMostUsedFirst(t *testing.T) {
	app := pool.Login{User: "app", Database: "shop"}.Keyed()
	report := pool.Login{User: "report", Database: "shop"}.Keyed()
	srv := &Server{sessions: map[cancelKey]*session{
		{pid: 1}: {login: report},
		{pid: 2}: {login: app},
		{pid: 3}: {login: app},
	}}
	got := srv.sessionLogins()
	if len(got) != 2 || got[0].User != "app" || got[1].User != "report" {
		t.Fatalf("session logins %+v, want app then report", got)
	}
	if got := (&Server{sessions: map[cancelKey]*session{}}).sessionLogins(); len(got) != 0 {
		t.Errorf("no session: %d logins, want none", len(got))
	}
}
