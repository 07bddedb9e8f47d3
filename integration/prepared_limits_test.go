package integration

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/config"
)

// TestPreparedStatementLimits: a session's named prepared statements are
// bounded in count and in bytes. A Parse beyond either limit gets ERROR
// 53400 naming the limit, the rest of its segment is skipped until Sync, and
// the session goes on: closing statements makes room again.
func TestPreparedStatementLimits(t *testing.T) {
	const (
		maxStatements = 10
		maxBytes      = 64 << 10
	)
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Limits.MaxPreparedStatements = maxStatements
		cfg.Limits.MaxPreparedStatementBytes = maxBytes
	})
	ctx := timeoutCtx(t, 3*statementTimeout)

	wantLimit := func(what string, err error, key string) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			t.Fatalf("%s: got %v, want ERROR 53400 naming %s", what, err, key)
		}
		if pgErr.Severity != "ERROR" || pgErr.Code != "53400" || !strings.Contains(pgErr.Message, key) {
			t.Errorf("%s: got %s %s %q, want ERROR 53400 naming %s", what, pgErr.Severity, pgErr.Code, pgErr.Message, key)
		}
	}
	stillWorks := func(what string, pg *pgconn.PgConn) {
		t.Helper()
		if _, err := pg.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
			t.Fatalf("%s: the session does not go on: %v", what, err)
		}
	}

	t.Run("count", func(t *testing.T) {
		pg := o.connect(t, nil).PgConn()
		for i := range maxStatements {
			if _, err := pg.Prepare(ctx, fmt.Sprintf("lim_%d", i), fmt.Sprintf("SELECT %d", i), nil); err != nil {
				t.Fatalf("statement %d of %d: %v", i+1, maxStatements, err)
			}
		}
		_, err := pg.Prepare(ctx, "lim_over", "SELECT 'one too many'", nil)
		wantLimit("statement over the count", err, "limits.max_prepared_statements")
		stillWorks("after the refused Parse", pg)
		// Statements made before still run.
		if err := pg.ExecPrepared(ctx, "lim_3", nil, nil, nil).Read().Err; err != nil {
			t.Errorf("a statement prepared before the refusal: %v", err)
		}
		if err := pg.Deallocate(ctx, "lim_0"); err != nil {
			t.Fatalf("deallocate: %v", err)
		}
		if _, err := pg.Prepare(ctx, "lim_over", "SELECT 'room again'", nil); err != nil {
			t.Errorf("a Parse after a Close made room: %v", err)
		}
	})

	t.Run("bytes", func(t *testing.T) {
		pg := o.connect(t, nil).PgConn()
		big := "SELECT '" + strings.Repeat("b", 40<<10) + "'"
		if _, err := pg.Prepare(ctx, "big_1", big, nil); err != nil {
			t.Fatalf("first 40 KiB statement: %v", err)
		}
		_, err := pg.Prepare(ctx, "big_2", big+" AS second", nil)
		wantLimit("second 40 KiB statement", err, "limits.max_prepared_statement_bytes")
		stillWorks("after the refused Parse", pg)
	})

	t.Run("segment_partly_sent_at_flush", func(t *testing.T) {
		pg := o.connect(t, nil).PgConn()
		for i := range maxStatements - 1 {
			if _, err := pg.Prepare(ctx, fmt.Sprintf("seg_%d", i), fmt.Sprintf("SELECT %d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		p := pg.StartPipeline(ctx)
		p.SendPrepare("seg_last", "SELECT 'last'", nil)
		p.SendFlushRequest()
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		if res, err := p.GetResults(); err != nil {
			t.Fatalf("the Parse within the limit, sent at a Flush: %T %v", res, err)
		}
		p.SendPrepare("seg_over", "SELECT 'over'", nil)
		p.SendQueryPrepared("seg_last", nil, nil, nil) // skipped after the error
		p.SendPipelineSync()
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		_, err := p.GetResults()
		wantLimit("Parse over the count after a Flush", err, "limits.max_prepared_statements")
		for {
			res, err := p.GetResults()
			if err != nil {
				t.Logf("after the refusal: %v", err)
				continue
			}
			if _, ok := res.(*pgconn.PipelineSync); ok {
				break
			}
			if res == nil {
				t.Fatalf("no PipelineSync after the refused Parse")
			}
		}
		if err := p.Close(); err != nil {
			t.Fatalf("close pipeline: %v", err)
		}
		stillWorks("after the refused segment", pg)
		if err := pg.ExecPrepared(ctx, "seg_last", nil, nil, nil).Read().Err; err != nil {
			t.Errorf("the statement parsed before the Flush: %v", err)
		}
	})
}
