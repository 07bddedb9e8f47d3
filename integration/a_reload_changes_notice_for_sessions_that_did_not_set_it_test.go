package integration

import (
	"testing"
)

// TestAReloadChangesNoticeForSessionsThatDidNotSetIt: routing.notice is the default of each
// session's pgowl.notice. A reload that changes it applies to every session open that did not set
// pgowl.notice, as a reload of postgresql.conf changes a setting for the sessions that did not set
// it, and leaves alone the sessions that did. Before, a session kept the value of its login.
func TestAReloadChangesNoticeForSessionsThatDidNotSetIt(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil) // routing.notice: true, the default
	following, setOn := o.connect(t, nil), o.connect(t, nil)
	runOnPrimary(t, setOn, "SET pgowl.notice = on")
	notices := func(conn *client) int {
		t.Helper()
		rs, err := runAndRoutes(t, conn, "SELECT 1")
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	if got := notices(following); got != 1 {
		t.Fatalf("before the reload: %d routing NOTICEs, want 1", got)
	}
	cfg := o.cfg
	cfg.Routing.Notice = false
	if err := o.inst.Apply(cfg); err != nil {
		t.Fatalf("reload with routing.notice false: %v", err)
	}
	if got := notices(following); got != 0 {
		t.Errorf("a session that never set pgowl.notice got %d routing NOTICEs after a reload turned routing.notice off, want 0", got)
	}
	if got := notices(setOn); got != 1 {
		t.Errorf("a session that SET pgowl.notice = on got %d routing NOTICEs after the reload, want 1: what a session set stays", got)
	}
	runOnPrimary(t, setOn, "RESET pgowl.notice")
	if got := notices(setOn); got != 0 {
		t.Errorf("after RESET pgowl.notice, %d routing NOTICEs, want the configured default (off): 0", got)
	}
	var shown string
	if err := following.QueryRow(timeoutCtx(t, statementTimeout), "SHOW pgowl.notice").Scan(&shown); err != nil || shown != "off" {
		t.Errorf("SHOW pgowl.notice after the reload: %q, %v; want off", shown, err)
	}
}
