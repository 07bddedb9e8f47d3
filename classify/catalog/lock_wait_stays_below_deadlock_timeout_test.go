package catalog

import (
	"context"
	"testing"
	"time"
)

// TestLockWaitStaysBelowDeadlockTimeout runs the statements that bound how long a catalogue read
// waits on a lock (the Manager's giveWayToDDL, a session read's sessionGiveWay) under several
// deadlock_timeout settings, and reads the lock_timeout each leaves. The read must always be the
// one to give up in a deadlock with DDL, so its wait must stay below deadlock_timeout, whatever
// the server's is: half of it, at most maxLockWait (and a session read's own limit), at least 1 ms
// (lock_timeout's finest step; at deadlock_timeout = 1 ms the two are equal). The session read is
// prepared once and run again after deadlock_timeout changes, as it is on a pooled connection,
// so that a bound fixed in its plan would show.
func TestLockWaitStaysBelowDeadlockTimeout(t *testing.T) {
	primary, ctx := startPrimaryForTest(t, time.Minute)
	conn := connectForTest(t, ctx, primary)

	// As a session read's statements are: prepared once, planned generically, run again.
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	prepare := func(name, query string) string {
		t.Helper()
		if _, err := conn.Prepare(ctx, name, query); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return name
	}
	sessionQuery := prepare(sessionGiveWay(sessionReadLimit * 2 * time.Second))
	shortLimitQuery := prepare(sessionGiveWay(20 * time.Millisecond))
	for _, c := range []struct {
		deadlockTimeout                  string
		manager, session, shortLimitRead string
	}{
		{deadlockTimeout: "1s", manager: "100ms", session: "100ms", shortLimitRead: "20ms"},
		{deadlockTimeout: "1min", manager: "100ms", session: "100ms", shortLimitRead: "20ms"},
		{deadlockTimeout: "1500ms", manager: "100ms", session: "100ms", shortLimitRead: "20ms"},
		{deadlockTimeout: "1h", manager: "100ms", session: "100ms", shortLimitRead: "20ms"},
		{deadlockTimeout: "1d", manager: "100ms", session: "100ms", shortLimitRead: "20ms"},
		{deadlockTimeout: "150ms", manager: "75ms", session: "75ms", shortLimitRead: "20ms"},
		{deadlockTimeout: "60ms", manager: "30ms", session: "30ms", shortLimitRead: "20ms"},
		{deadlockTimeout: "30ms", manager: "15ms", session: "15ms", shortLimitRead: "15ms"},
		{deadlockTimeout: "5ms", manager: "2ms", session: "2ms", shortLimitRead: "2ms"}, // 2.5 rounds to even
		{deadlockTimeout: "1ms", manager: "1ms", session: "1ms", shortLimitRead: "1ms"},
	} {
		t.Run("deadlock_timeout="+c.deadlockTimeout, func(t *testing.T) {
			lockTimeoutAfter := func(query string) string {
				t.Helper()
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(context.Background()) //nolint:errcheck // settings only
				if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '"+c.deadlockTimeout+"'"); err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctx, query); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				var got string
				if err := tx.QueryRow(ctx, "SHOW lock_timeout").Scan(&got); err != nil {
					t.Fatal(err)
				}
				return got
			}
			if got := lockTimeoutAfter(giveWayToDDL()); got != c.manager {
				t.Errorf("the Manager's reads wait %s on a lock, want %s", got, c.manager)
			}
			if got := lockTimeoutAfter(sessionQuery); got != c.session {
				t.Errorf("a session's read waits %s on a lock, want %s", got, c.session)
			}
			if got := lockTimeoutAfter(shortLimitQuery); got != c.shortLimitRead {
				t.Errorf("a session's read limited to 20ms waits %s on a lock, want %s", got, c.shortLimitRead)
			}
		})
	}
}
