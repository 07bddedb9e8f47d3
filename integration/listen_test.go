package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// TestListenerToldWhenItsBackendIsLost: a client waiting for notifications
// sends nothing. When the backend it listens on goes away (here: killed on
// the node), it must learn so, as a direct connection would, instead of
// waiting for ever for notifications that can no longer come: pgowl sends a
// FATAL (57P01) and closes the connection, and a new connection listens
// again.
func TestListenerToldWhenItsBackendIsLost(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	const app = "listen-lost"
	listener := o.connect(t, func(cfg *pgx.ConnConfig) { cfg.RuntimeParams["application_name"] = app })
	ctx := timeoutCtx(t, 30*time.Second)
	if _, err := listener.Exec(ctx, "LISTEN lost_channel"); err != nil {
		t.Fatalf("LISTEN: %v", err)
	}
	listener.routes(t)
	waited := make(chan error, 1)
	go func() {
		_, err := listener.WaitForNotification(timeoutCtx(t, 20*time.Second))
		waited <- err
	}()
	primary := c.Nodes[0]
	if err := primary.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '"+app+"'"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		pgErr, ok := asPgError(err)
		if !ok || pgErr.Severity != "FATAL" || pgErr.Code != "57P01" {
			t.Fatalf("the waiting listener got %v, want a FATAL 57P01 from pgowl", err)
		}
		t.Logf("listener told: %s", pgErr.Message)
	case <-time.After(15 * time.Second):
		t.Fatal("the listener was not told that its backend was lost: it would wait for ever")
	}
	again := o.connect(t, nil)
	if _, err := again.Exec(ctx, "LISTEN lost_channel"); err != nil {
		t.Fatalf("LISTEN on a new connection: %v", err)
	}
	notifier := o.connect(t, nil)
	if _, err := notifier.Exec(ctx, "NOTIFY lost_channel, 'back'"); err != nil {
		t.Fatal(err)
	}
	n, err := again.WaitForNotification(timeoutCtx(t, 5*time.Second))
	if err != nil || n.Payload != "back" {
		t.Fatalf("the new listener: %v %v", n, err)
	}
}

// TestListenerToldWhenItsBackendIsLostDuringStatement: the listening
// session's backend is terminated while one of its statements runs. The
// LISTEN is gone with it, so the client must not go on with a connection
// that will never receive a notification again: pgowl answers the
// statement with a FATAL 57P01 and closes the connection, as it does when
// the loss happens while the client is idle.
func TestListenerToldWhenItsBackendIsLostDuringStatement(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	const app = "listen-lost-busy"
	listener := o.connect(t, func(cfg *pgx.ConnConfig) { cfg.RuntimeParams["application_name"] = app })
	ctx := timeoutCtx(t, 30*time.Second)
	if _, err := listener.Exec(ctx, "LISTEN lost_busy_channel"); err != nil {
		t.Fatalf("LISTEN: %v", err)
	}
	listener.routes(t)
	ran := make(chan error, 1)
	go func() {
		_, err := listener.Exec(timeoutCtx(t, 20*time.Second), "SELECT pg_sleep(15)")
		ran <- err
	}()
	primary := c.Nodes[0]
	deadline := time.Now().Add(10 * time.Second)
	for {
		var terminated int
		if err := primary.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE '%pg_sleep%' AND state = 'active'", app).Scan(&terminated); err != nil {
			t.Fatal(err)
		}
		if terminated > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener's pg_sleep never showed as active on the primary")
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-ran:
		pgErr, ok := asPgError(err)
		if !ok || pgErr.Severity != "FATAL" || pgErr.Code != "57P01" {
			t.Fatalf("the listener's statement got %v, want a FATAL 57P01 from pgowl", err)
		}
		t.Logf("listener told: %s", pgErr.Message)
	case <-time.After(15 * time.Second):
		t.Fatal("the listener's statement did not end after its backend was terminated")
	}
	var one int
	if err := listener.QueryRow(ctx, "SELECT 1").Scan(&one); err == nil {
		t.Errorf("the listener's connection still answers after its LISTEN backend was lost: its notifications would silently stop")
	}
}
