package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// connectTimeout bounds one client's connection and authentication.
const connectTimeout = 15 * time.Second

// errorKey returns what a failure is counted under: the SQLSTATE when the server (pgowl or a
// node) answered with one, else a short class.
func errorKey(err error) string {
	var pgErr *pgconn.PgError
	var unexpected *unexpectedResult
	switch {
	case errors.As(err, &pgErr):
		return pgErr.Code
	case errors.As(err, &unexpected):
		return "unexpected result"
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return "timeout"
	default:
		return "connection"
	}
}

// errorText is a failure's message, with the server's detail when there is one.
func errorText(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		text := pgErr.Severity + " " + pgErr.Code + ": " + pgErr.Message
		if pgErr.Detail != "" {
			text += " | DETAIL: " + pgErr.Detail
		}
		if pgErr.Hint != "" {
			text += " | HINT: " + pgErr.Hint
		}
		return text
	}
	return err.Error()
}

// failureTally counts failures by key, keeping the first message and the time they took.
type failureTally struct {
	mu    sync.Mutex
	byKey map[string]*failureKind
}

type failureKind struct {
	key     string
	count   int64
	example string
	total   time.Duration // summed latency of the failed attempts
	maxLat  time.Duration
	// byKind splits the count by what failed (connect, select, read, write, ...).
	byKind map[string]int64
}

// add counts one failure of kind that took lat.
func (t *failureTally) add(kind string, err error, lat time.Duration) {
	key := errorKey(err)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byKey == nil {
		t.byKey = map[string]*failureKind{}
	}
	f := t.byKey[key]
	if f == nil {
		f = &failureKind{key: key, example: errorText(err), byKind: map[string]int64{}}
		t.byKey[key] = f
	}
	f.count++
	f.total += lat
	f.maxLat = max(f.maxLat, lat)
	f.byKind[kind]++
}

// total returns the number of failures.
func (t *failureTally) total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, f := range t.byKey {
		n += f.count
	}
	return n
}

// count returns the failures counted under key.
func (t *failureTally) count(key string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.byKey[key]; f != nil {
		return f.count
	}
	return 0
}

// countKind returns the failures counted under key that happened in kind (read, write, ...).
func (t *failureTally) countKind(key, kind string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.byKey[key]; f != nil {
		return f.byKind[kind]
	}
	return 0
}

// sorted returns the kinds of failure, most frequent first.
func (t *failureTally) sorted() []failureKind {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []failureKind
	for _, f := range t.byKey {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].count != out[j].count {
			return out[i].count > out[j].count
		}
		return out[i].key < out[j].key
	})
	return out
}

// connectAll opens n client connections through pgowl, parallel at a time; each is passed to
// prepare (which may be nil) before it counts as connected. It returns the connections that
// are open (nil where a client failed) and how long it took; failures go to tally.
func connectAll(ctx context.Context, cfg *pgconn.Config, n, parallel int, what string,
	prepare func(context.Context, *pgconn.PgConn) error, tally *failureTally) ([]*pgconn.PgConn, time.Duration) {
	conns := make([]*pgconn.PgConn, n)
	var next, done, failed atomic.Int64
	began := time.Now()
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-tick.C:
				logf("%s: %d/%d connected, %d failed (%.0f/s)", what, done.Load(), n, failed.Load(),
					float64(done.Load())/time.Since(began).Seconds())
			}
		}
	}()
	var wg sync.WaitGroup
	for range min(parallel, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				conn, kind, err := connectOne(ctx, cfg, prepare)
				if err != nil {
					failed.Add(1)
					tally.add(kind, err, time.Since(t0))
					continue
				}
				conns[i] = conn
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stopProgress)
	<-progressDone
	took := time.Since(began)
	logf("%s: %d/%d connected, %d failed, in %s", what, done.Load(), n, failed.Load(), took.Round(time.Millisecond))
	return conns, took
}

// connectOne opens one client connection and prepares it. On failure it says which step failed.
func connectOne(ctx context.Context, cfg *pgconn.Config, prepare func(context.Context, *pgconn.PgConn) error) (*pgconn.PgConn, string, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, "connect", err
	}
	if prepare != nil {
		if err := prepare(cctx, conn); err != nil {
			closeConn(conn)
			return nil, "first query", err
		}
	}
	return conn, "", nil
}

// closeConn sends Terminate and closes, within a short bound.
func closeConn(conn *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// closeAll closes every open connection in conns, parallel at a time.
func closeAll(conns []*pgconn.PgConn, parallel int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parallel, max(len(conns), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(conns) {
					return
				}
				if conns[i] != nil {
					closeConn(conns[i])
					conns[i] = nil
				}
			}
		}()
	}
	wg.Wait()
}

// countOpen returns how many entries of conns are connections.
func countOpen(conns []*pgconn.PgConn) int {
	n := 0
	for _, c := range conns {
		if c != nil {
			n++
		}
	}
	return n
}

// selectOne runs SELECT 1 and checks its answer.
func selectOne(ctx context.Context, conn *pgconn.PgConn) error {
	results, err := conn.Exec(ctx, "SELECT 1").ReadAll()
	if err != nil {
		return err
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || string(results[0].Rows[0][0]) != "1" {
		return fmt.Errorf("SELECT 1 answered unexpectedly: %d results", len(results))
	}
	return nil
}
