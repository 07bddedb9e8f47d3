package integration

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestHandOverUnderContention runs many clients over a pool of two backends
// per node, so that nearly every unit waits for a backend another session
// releases (with deferred BEGIN, transactions included): every client must
// get exactly its own results, in simple and extended protocol, inside and
// outside transactions, and every write must land.
func TestHandOverUnderContention(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Pool.MaxPerNode = 2
		cfg.Pool.AcquireTimeout = 20 * time.Second
		cfg.Routing.Notice = false
	})
	createTable(t, c, "t_handover", "CREATE TABLE t_handover (client int, n int, PRIMARY KEY (client, n))")
	const clients, rounds = 24, 25
	modes := []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec}
	conns := make([]*client, clients)
	for i := range conns {
		conns[i] = o.connect(t, withMode(modes[i%len(modes)]))
	}
	ctx := timeoutCtx(t, 2*time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < rounds; n++ {
				var got string
				want := fmt.Sprintf("client %d round %d", i, n)
				if err := conn.QueryRow(ctx, "SELECT $1::text", want).Scan(&got); err != nil {
					errs <- fmt.Errorf("client %d read %d: %w", i, n, err)
					return
				}
				if got != want {
					errs <- fmt.Errorf("client %d read %d got %q, want %q: a reply went to the wrong client", i, n, got, want)
					return
				}
				tx, err := conn.Begin(ctx)
				if err != nil {
					errs <- fmt.Errorf("client %d begin %d: %w", i, n, err)
					return
				}
				var client, round int
				err = tx.QueryRow(ctx, "INSERT INTO t_handover VALUES ($1, $2) RETURNING client, n", i, n).Scan(&client, &round)
				if err == nil && (client != i || round != n) {
					err = fmt.Errorf("got row (%d, %d)", client, round)
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					errs <- fmt.Errorf("client %d write %d: %w", i, n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := primaryInt(t, c, "SELECT count(*) FROM t_handover"); got != clients*rounds {
		t.Errorf("the primary has %d rows, want %d", got, clients*rounds)
	}
}
