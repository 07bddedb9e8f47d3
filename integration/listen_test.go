package integration

import (
	"testing"
	"time"
)

// TestListenNotify checks that LISTEN pins the session to the primary and
// that a notification reaches a client that waits for it while idle, and
// that UNLISTEN * releases the pin.
func TestListenNotify(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	listener := o.connect(t, nil)
	notifier := o.connect(t, nil)
	ctx := timeoutCtx(t, 20*time.Second)

	if _, err := listener.Exec(ctx, "LISTEN owl_channel"); err != nil {
		t.Fatalf("LISTEN: %v", err)
	}
	listener.routes(t)
	// The listener is pinned: even a read now runs where it listens, the primary.
	if _, err := listener.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	r := listener.oneRoute(t, "read while listening")
	wantRoute(t, "read while listening", r, "primary", "SESSION_PINNED")

	for i, payload := range []string{"first", "second"} {
		if _, err := notifier.Exec(ctx, "SELECT pg_notify('owl_channel', $1)", payload); err != nil {
			t.Fatalf("notify: %v", err)
		}
		waitCtx := timeoutCtx(t, 5*time.Second)
		n, err := listener.WaitForNotification(waitCtx)
		if err != nil {
			t.Fatalf("notification %d did not arrive while the listener was idle: %v", i, err)
		}
		if n.Channel != "owl_channel" || n.Payload != payload {
			t.Fatalf("got notification %q/%q, want owl_channel/%s", n.Channel, n.Payload, payload)
		}
	}
	// After waiting, the session still works on its pinned backend.
	var one int
	if err := listener.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query after notifications: %v", err)
	}
	listener.routes(t)

	if _, err := listener.Exec(ctx, "UNLISTEN *"); err != nil {
		t.Fatal(err)
	}
	listener.routes(t)
	if _, err := listener.Exec(ctx, "SELECT 2"); err != nil {
		t.Fatal(err)
	}
	r = listener.oneRoute(t, "read after UNLISTEN *")
	wantRoute(t, "read after UNLISTEN *", r, "standby", "READ_ONLY")
}
