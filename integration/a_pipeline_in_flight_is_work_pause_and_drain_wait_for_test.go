package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
)

// TestAPipelineInFlightIsWorkPauseAndDrainWaitFor: a pipeline sent up to a Flush (or past 1 MiB,
// as a large JDBC executeBatch is) holds an implicit transaction open on its node until its Sync.
// That is work in flight, as a transaction block is: the shutdown's drain lets it reach its Sync
// and commit, and PAUSE waits for it and does not hold its Sync. Before, the drain ended the
// session at once with 57P01 (the INSERT was lost, and pgowl exited 0 as if nothing was), and
// PAUSE answered at once while the transaction held its locks on the primary, then held the
// pipeline's Sync until RESUME.
func TestAPipelineInFlightIsWorkPauseAndDrainWaitFor(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "t_pipeline_in_flight", "CREATE TABLE t_pipeline_in_flight (id int)")
	insertThenFlush := func(t *testing.T, conn *client, id string) {
		t.Helper()
		rawSend(t, conn, &pgproto3.Parse{Query: "INSERT INTO t_pipeline_in_flight VALUES (" + id + ")"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Flush{})
		rawReceive(t, conn, func(r rawReply, _ []rawReply) bool { return r.typ == 'C' })
	}
	syncCommits := func(t *testing.T, conn *client, what string) {
		t.Helper()
		rawSend(t, conn, &pgproto3.Sync{})
		replies := rawReceive(t, conn, untilReady(1))
		for _, r := range replies {
			if r.typ == 'E' {
				t.Fatalf("%s: the pipeline's Sync got %s, want its ReadyForQuery", what, describeReplies(replies))
			}
		}
	}

	t.Run("drain", func(t *testing.T) {
		port := freePort(t)
		p := startProcessOwl(t, port, owlYAML(c, port, []string{"pg1", "pg2"}, appPassword, "shutdown_timeout: 20s\n"))
		p.waitLog(t, proxyReadyTimeout, "pgowl serving")
		ctx := timeoutCtx(t, time.Minute)
		pc, err := pgx.Connect(ctx, p.dsn(appPassword, appDatabase))
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(context.Background())
		conn := &client{Conn: pc, notices: &noticeLog{}}
		insertThenFlush(t, conn, "1")
		p.signal(t, syscall.SIGTERM)
		p.waitLog(t, 5*time.Second, "pgowl is shutting down")
		time.Sleep(300 * time.Millisecond) // the drain looks for idle sessions every 20 ms
		syncCommits(t, conn, "during the drain")
		if rows := primaryInt(t, c, "SELECT count(*) FROM t_pipeline_in_flight WHERE id = 1"); rows != 1 {
			t.Errorf("the pipeline's INSERT: %d rows committed, want 1", rows)
		}
		pc.Close(ctx)
		if code := p.wait(t, 10*time.Second); code != 0 {
			t.Errorf("pgowl exited with %d, want 0", code)
		}
	})

	pauseWaitsForTheSync := func(t *testing.T, sendPart func(*testing.T, *client), wantRow bool) {
		o := startOwl(t, c, func(cfg *config.Config) { cfg.Admin.Users = []string{appUser} })
		conn := o.connect(t, nil)
		sendPart(t, conn)
		ctx := timeoutCtx(t, time.Minute)
		console := o.console(t)
		paused := make(chan error, 1)
		go func() { _, err := console.Exec(ctx, "PAUSE"); paused <- err }()
		select {
		case err := <-paused:
			t.Fatalf("PAUSE answered (%v) while a pipeline was not yet synced on its node", err)
		case <-time.After(500 * time.Millisecond):
		}
		syncCommits(t, conn, "while PAUSE waits")
		select {
		case err := <-paused:
			if err != nil {
				t.Fatalf("PAUSE: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("PAUSE did not answer once the pipeline was synced")
		}
		if _, err := console.Exec(ctx, "RESUME"); err != nil {
			t.Fatalf("RESUME: %v", err)
		}
		if rows := primaryInt(t, c, "SELECT count(*) FROM t_pipeline_in_flight WHERE id = 2"); wantRow && rows != 1 {
			t.Errorf("the pipeline's INSERT: %d rows committed, want 1", rows)
		}
	}
	t.Run("pause", func(t *testing.T) {
		pauseWaitsForTheSync(t, func(t *testing.T, conn *client) { insertThenFlush(t, conn, "2") }, true)
	})
	// A part that failed leaves the node skipping to the pipeline's Sync, which must reach it.
	t.Run("pause_after_a_failed_part", func(t *testing.T) {
		pauseWaitsForTheSync(t, func(t *testing.T, conn *client) {
			rawSend(t, conn, &pgproto3.Parse{Query: "SELECT 1/0"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Flush{})
			rawReceive(t, conn, func(r rawReply, _ []rawReply) bool { return r.typ == 'E' })
		}, false)
	})
}
