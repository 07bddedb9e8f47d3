package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestAShutdownWhilePausedEndsTheHeldUnits: SIGTERM while the admin console's PAUSE holds units.
// The drain must not wait for a RESUME that cannot come (the console's sessions end with the
// rest): a held unit outside a transaction ends with FATAL 57P01, as the session's next message
// would, and one of a transaction already begun (a deferred BEGIN) runs, since the drain lets
// transactions finish; pgowl then exits. It waited for ever before: no "pgowl drained", no exit.
func TestAShutdownWhilePausedEndsTheHeldUnits(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "t_paused_shutdown", "CREATE TABLE t_paused_shutdown (id int)")
	port := freePort(t)
	p := startProcessOwl(t, port, owlYAML(c, port, []string{"pg1", "pg2"}, appPassword, "shutdown_timeout: 20s\n"))
	p.waitLog(t, proxyReadyTimeout, "pgowl serving")
	ctx := timeoutCtx(t, time.Minute)
	connect := func(database string) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, p.dsn(appPassword, database)+"&default_query_exec_mode=simple_protocol")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	console, idle, inBlock := connect("pgowl"), connect(appDatabase), connect(appDatabase)
	if _, err := inBlock.Exec(ctx, "BEGIN"); err != nil { // deferred: answered by pgowl
		t.Fatal(err)
	}
	if _, err := console.Exec(ctx, "PAUSE"); err != nil {
		t.Fatalf("PAUSE: %v", err)
	}
	heldIdle, heldInBlock := make(chan error, 1), make(chan error, 1)
	go func() { _, err := idle.Exec(ctx, "SELECT 1"); heldIdle <- err }()
	go func() { _, err := inBlock.Exec(ctx, "INSERT INTO t_paused_shutdown VALUES (1)"); heldInBlock <- err }()
	select {
	case err := <-heldIdle:
		t.Fatalf("a statement ran while paused: %v", err)
	case err := <-heldInBlock:
		t.Fatalf("a transaction's first statement ran while paused: %v", err)
	case <-time.After(500 * time.Millisecond):
	}

	p.signal(t, syscall.SIGTERM)
	for _, held := range []struct {
		what  string
		ended chan error
		want  string // "" succeeds
	}{
		{"the held statement outside a transaction", heldIdle, "57P01"},
		{"the held first statement of a deferred transaction", heldInBlock, ""},
	} {
		select {
		case err := <-held.ended:
			if held.want == "" {
				if err != nil {
					t.Errorf("%s, released by the shutdown: %v, want it run", held.what, err)
				}
			} else {
				wantSQLState(t, held.what+", released by the shutdown", err, held.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waits 10s after SIGTERM: the drain waits for a RESUME that cannot come", held.what)
		}
	}
	if _, err := inBlock.Exec(ctx, "COMMIT"); err != nil {
		t.Errorf("COMMIT of the transaction the drain let finish: %v", err)
	}
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("pgowl exited with %d, want 0: the one open transaction committed", code)
	}
	p.waitLog(t, time.Second, "shutdown while paused")
	if rows := primaryInt(t, c, "SELECT count(*) FROM t_paused_shutdown"); rows != 1 {
		t.Errorf("t_paused_shutdown holds %d rows, want the committed one", rows)
	}
}
