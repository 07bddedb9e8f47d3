package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
)

// TestAReadAfterAPipelinedWriteSeesIt: read-your-writes (session scope, the default). A client
// pipelines an INSERT in the extended protocol and sends Flush, reads the INSERT's
// CommandComplete, then sends Sync: its implicit transaction commits at the Sync. Its next read
// must see the row, as a direct connection's does. A monitor sample of the primary taken while
// the batch was open (after the Flush, before the Sync) does not cover the commit; a standby
// that has replayed up to that sample but not the commit has no row. (Another client's commit
// between the Flush and the Sync lets the standby replay as far as the sample.)
func TestAReadAfterAPipelinedWriteSeesIt(t *testing.T) {
	for _, flushFirst := range []bool{true, false} {
		name := "flush-then-sync"
		if !flushFirst {
			name = "sync-only"
		}
		t.Run(name, func(t *testing.T) { pipelinedWriteThenRead(t, flushFirst) })
	}
}

func pipelinedWriteThenRead(t *testing.T, flushFirst bool) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.Nodes[0].Exec(ctx, `DROP TABLE IF EXISTS public.h2_ryw_pipe;
		CREATE TABLE public.h2_ryw_pipe (id int primary key);
		CREATE TABLE IF NOT EXISTS public.h2_ryw_side (at timestamptz);
		GRANT ALL ON public.h2_ryw_pipe TO app;`); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Routing.ReadYourWrites = config.ReadYourWritesSession
		cfg.Monitor.Interval = 2 * time.Second
		cfg.Monitor.DownAfter = 20 * time.Second
	})
	standbys := c.Nodes[1:]
	resume := resumeReplayAtCleanup(t, standbys)
	var notices []string
	pcfg, err := pgconn.ParseConfig(o.dsn(appUser, appPassword, appDatabase, nil))
	if err != nil {
		t.Fatal(err)
	}
	pcfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message+" / "+n.Detail) }
	conn, err := pgconn.ConnectConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// A first read: the session has a standby to read on.
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM public.h2_ryw_pipe").ReadAll(); err != nil {
		t.Fatal(err)
	}

	p := conn.StartPipeline(ctx)
	p.SendQueryParams("INSERT INTO public.h2_ryw_pipe VALUES (1)", nil, nil, nil, nil)
	if flushFirst {
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		res, err := p.GetResults()
		if err != nil {
			t.Fatal(err)
		}
		if rr, ok := res.(*pgconn.ResultReader); ok {
			if _, err := rr.Close(); err != nil {
				t.Fatalf("insert: %v", err)
			}
		}
		// Another client commits a write meanwhile (a busy primary): its commit flushes the
		// WAL up to it, the open batch's INSERT included.
		if err := c.Nodes[0].Exec(ctx, "INSERT INTO public.h2_ryw_side VALUES (now())"); err != nil {
			t.Fatal(err)
		}
		written := time.Now()
		var lastLog time.Time
		// A monitor sample of the primary after the INSERT, its WAL flushed; the standbys
		// replayed as far (the commit is not sent yet).
		o.waitSnapshot(t, 20*time.Second, "a sample of the open batch", func(s *route.Snapshot) bool {
			var primary *route.NodeState
			for i := range s.Nodes {
				if s.Nodes[i].Role == route.RolePrimary {
					primary = &s.Nodes[i]
				}
			}
			if primary == nil || !primary.SampledAt.After(written.Add(100*time.Millisecond)) || primary.FlushPosition < primary.WALPosition {
				if primary != nil && time.Since(lastLog) > time.Second {
					lastLog = time.Now()
					t.Logf("primary sampled %v after the write, insert %v flush %v", primary.SampledAt.Sub(written), primary.WALPosition, primary.FlushPosition)
				}
				return false
			}
			for i := range s.Nodes {
				if n := &s.Nodes[i]; n.Role != route.RolePrimary && (!n.Up || !n.LagKnown || n.WALPosition < primary.WALPosition) {
					if time.Since(lastLog) > time.Second {
						lastLog = time.Now()
						t.Logf("%s replay %v, primary insert %v", n.Name, n.WALPosition, primary.WALPosition)
					}
					return false
				}
			}
			return true
		})
		for _, n := range standbys {
			if err := n.PauseReplay(ctx); err != nil {
				t.Fatalf("pause replay on %s: %v", n.Name, err)
			}
		}
	} else {
		for _, n := range standbys {
			if err := n.PauseReplay(ctx); err != nil {
				t.Fatalf("pause replay on %s: %v", n.Name, err)
			}
		}
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	for {
		res, err := p.GetResults()
		if err != nil {
			t.Fatalf("pipeline: %v", err)
		}
		if res == nil {
			break
		}
		if rr, ok := res.(*pgconn.ResultReader); ok {
			if _, err := rr.Close(); err != nil {
				t.Fatalf("insert: %v", err)
			}
		}
		if _, ok := res.(*pgconn.PipelineSync); ok {
			break
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// The read right after the commit.
	notices = nil
	results, err := conn.Exec(ctx, "SELECT count(*) FROM public.h2_ryw_pipe").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	got := string(results[0].Rows[0][0])
	t.Logf("read after the pipelined write: count %s %v", got, notices)
	var direct int
	if err := c.Nodes[0].QueryRow(ctx, "SELECT count(*) FROM public.h2_ryw_pipe").Scan(&direct); err != nil || direct != 1 {
		t.Fatalf("oracle: the primary has %d rows, %v", direct, err)
	}
	if got != "1" {
		t.Errorf("the session's read right after its own committed pipelined INSERT saw %s rows (the primary has 1): read-your-writes served it a stale standby %v", got, notices)
	}
	resume()
}
