package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/internal/cluster"
)

// The load test's statements.
const (
	readSQL   = "SELECT abalance FROM accounts WHERE aid = $1"
	updateSQL = "UPDATE accounts SET abalance = abalance + 1 WHERE aid = $1"
)

const (
	// writePercent of the transactions are writes.
	writePercent = 20
	// txTimeout bounds one transaction, however long pgowl keeps it waiting.
	txTimeout = 30 * time.Second
	// maxTxPerClient bounds each client's loop in count, next to -duration bounding it in time.
	maxTxPerClient = 1_000_000
)

// unexpectedResult is a transaction whose answer was not what it should be.
type unexpectedResult struct{ what string }

func (e *unexpectedResult) Error() string { return "unexpected result: " + e.what }

// latencies summarises a set of transaction latencies.
type latencies struct {
	count         int
	p50, p99, max time.Duration
	mean          time.Duration
}

func summarize(d []time.Duration) latencies {
	if len(d) == 0 {
		return latencies{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	at := func(q float64) time.Duration {
		i := int(q*float64(len(d))+0.5) - 1
		return d[min(max(i, 0), len(d)-1)]
	}
	return latencies{count: len(d), p50: at(0.50), p99: at(0.99), max: d[len(d)-1], mean: sum / time.Duration(len(d))}
}

// loadResult is what the load test measured.
type loadResult struct {
	clients   int
	connected int
	connect   time.Duration
	// connectFailures are clients that never got a connection before the run.
	connectFailures *failureTally

	duration time.Duration // -duration
	elapsed  time.Duration // from the start until the last client finished

	okReads, okWrites int64
	failures          *failureTally
	reconnects        int64

	all, reads, writes latencies

	// watch is what sampling saw during the run.
	watch *watchStats
	// Per node, in node order: pg_stat_statements calls of the two statements.
	readCalls, updateCalls []int64
	callsErr               string

	procBefore, procAfter procSample
	cpu                   cpuUse // from the start until the last client finished

	// balance is what the run added to sum(abalance) on the primary: one per committed write.
	balance    int64
	balanceErr string
}

// runLoad runs o.clients clients of short transactions for o.duration.
func runLoad(ctx context.Context, o options, p *pgowlProcess, counter *nodeCounter, cl *cluster.Cluster, probe *cpuProbe) (*loadResult, error) {
	res := &loadResult{clients: o.clients, duration: o.duration, connectFailures: &failureTally{}, failures: &failureTally{}}
	cfg, err := p.connConfig()
	if err != nil {
		return nil, err
	}
	for _, n := range cl.Nodes {
		if err := n.ResetStatementStats(ctx); err != nil {
			return nil, err
		}
	}
	balanceBefore, err := sumBalance(ctx, cl)
	if err != nil {
		return nil, err
	}
	conns, took := connectAll(ctx, cfg, o.clients, o.parallel, "load", nil, res.connectFailures)
	res.connect = took
	res.connected = countOpen(conns)
	if err := ctx.Err(); err != nil {
		closeAll(conns, o.parallel)
		return nil, err
	}

	workers := make([]*loadWorker, 0, res.connected)
	for i, c := range conns {
		if c != nil {
			workers = append(workers, &loadWorker{id: i, conn: c, cfg: cfg, rows: o.rows, res: res})
		}
	}
	defer func() {
		for _, w := range workers {
			if w.conn != nil {
				conns[w.id] = w.conn // a reconnected client's connection is the one to close
			} else {
				conns[w.id] = nil
			}
		}
		closeAll(conns, o.parallel)
	}()

	if res.procBefore, err = sampleProc(p.pid); err != nil {
		return nil, err
	}
	show, _, err := connectOne(ctx, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("connect the SHOW pgowl.nodes probe: %w", err)
	}
	defer closeConn(show)
	start := make(chan struct{})
	cpuBefore := probe.snapshot()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			w.run(ctx)
		}()
	}
	stopProgress := make(chan struct{})
	began := time.Now()
	end := began.Add(o.duration)
	for _, w := range workers {
		w.end = end
	}
	logf("load: %d clients start, for %s", len(workers), o.duration)
	close(start)
	watch := startWatch(ctx, counter, show, p.pid)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-tick.C:
				ok := atomic.LoadInt64(&res.okReads) + atomic.LoadInt64(&res.okWrites)
				logf("load: %s: %d transactions ok (%.0f/s), %d failed", time.Since(began).Round(time.Second), ok,
					float64(ok)/time.Since(began).Seconds(), res.failures.total())
			}
		}
	}()
	wg.Wait()
	res.elapsed = time.Since(began)
	res.cpu = probe.snapshot().since(cpuBefore)
	close(stopProgress)
	res.watch = watch.finish()
	<-progressDone
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if res.procAfter, err = sampleProc(p.pid); err != nil {
		return nil, err
	}

	var all, reads, writes []time.Duration
	for _, w := range workers {
		reads = append(reads, w.readLat...)
		writes = append(writes, w.writeLat...)
	}
	all = append(append(all, reads...), writes...)
	res.all, res.reads, res.writes = summarize(all), summarize(reads), summarize(writes)
	logf("load: %d reads and %d writes ok, %d failed in %s (%.0f transactions/s); p50 %s, p99 %s",
		res.okReads, res.okWrites, res.failures.total(), res.elapsed.Round(time.Millisecond),
		float64(res.okReads+res.okWrites)/res.elapsed.Seconds(), res.all.p50, res.all.p99)

	for _, n := range cl.Nodes {
		r, err1 := n.StatementCalls(ctx, "SELECT abalance FROM accounts%")
		u, err2 := n.StatementCalls(ctx, "UPDATE accounts SET abalance%")
		if err := errors.Join(err1, err2); err != nil {
			res.callsErr = err.Error()
			break
		}
		res.readCalls = append(res.readCalls, r)
		res.updateCalls = append(res.updateCalls, u)
	}
	if after, err := sumBalance(ctx, cl); err != nil {
		res.balanceErr = err.Error()
	} else {
		res.balance = after - balanceBefore
	}
	return res, nil
}

// sumBalance returns sum(abalance) on the primary.
func sumBalance(ctx context.Context, cl *cluster.Cluster) (int64, error) {
	var sum int64
	err := cl.Nodes[0].QueryRow(ctx, "SELECT coalesce(sum(abalance), 0)::bigint FROM accounts").Scan(&sum)
	return sum, err
}

// loadWorker is one client of the load test.
type loadWorker struct {
	id   int
	conn *pgconn.PgConn
	cfg  *pgconn.Config
	rows int
	end  time.Time
	res  *loadResult

	readLat, writeLat []time.Duration
	param             []byte
}

// run loops over transactions until the end time, the count bound or ctx.
func (w *loadWorker) run(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(w.id), uint64(time.Now().UnixNano())))
	for n := 0; n < maxTxPerClient && time.Now().Before(w.end) && ctx.Err() == nil; n++ {
		if w.conn == nil || w.conn.IsClosed() {
			if !w.reconnect(ctx) {
				continue
			}
		}
		w.param = strconv.AppendInt(w.param[:0], int64(rng.IntN(w.rows)+1), 10)
		write := rng.IntN(100) < writePercent
		kind := "read"
		if write {
			kind = "write"
		}
		t0 := time.Now()
		tctx, cancel := context.WithTimeout(ctx, txTimeout)
		var err error
		if write {
			err = w.write(tctx)
		} else {
			err = w.read(tctx)
		}
		cancel()
		lat := time.Since(t0)
		if err == nil {
			if write {
				atomic.AddInt64(&w.res.okWrites, 1)
				w.writeLat = append(w.writeLat, lat)
			} else {
				atomic.AddInt64(&w.res.okReads, 1)
				w.readLat = append(w.readLat, lat)
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		w.res.failures.add(kind, err, lat)
		w.recover()
		if lat < 10*time.Millisecond {
			time.Sleep(10 * time.Millisecond) // no tight loop over an instant failure
		}
	}
}

// read runs the read transaction: one statement, extended protocol.
func (w *loadWorker) read(ctx context.Context) error {
	res := w.conn.ExecParams(ctx, readSQL, [][]byte{w.param}, nil, nil, nil).Read()
	if res.Err != nil {
		return res.Err
	}
	if len(res.Rows) != 1 {
		return &unexpectedResult{fmt.Sprintf("the read returned %d rows", len(res.Rows))}
	}
	return nil
}

// write runs the write transaction: BEGIN, UPDATE, COMMIT, one round trip each.
func (w *loadWorker) write(ctx context.Context) error {
	if _, err := w.conn.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		return err
	}
	res := w.conn.ExecParams(ctx, updateSQL, [][]byte{w.param}, nil, nil, nil).Read()
	if res.Err != nil {
		return res.Err
	}
	if res.CommandTag.RowsAffected() != 1 {
		return &unexpectedResult{"UPDATE reported " + res.CommandTag.String()}
	}
	results, err := w.conn.Exec(ctx, "COMMIT").ReadAll()
	if err != nil {
		return err
	}
	if len(results) != 1 || results[0].CommandTag.String() != "COMMIT" {
		return &unexpectedResult{"COMMIT did not answer COMMIT"}
	}
	return nil
}

// recover leaves an aborted transaction with ROLLBACK; a connection that cannot is closed.
func (w *loadWorker) recover() {
	if w.conn == nil || w.conn.IsClosed() {
		return
	}
	if w.conn.TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := w.conn.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		closeConn(w.conn)
	}
}

// reconnect replaces a closed connection; false means it failed (and was counted).
func (w *loadWorker) reconnect(ctx context.Context) bool {
	if w.conn != nil {
		closeConn(w.conn)
		w.conn = nil
	}
	t0 := time.Now()
	conn, _, err := connectOne(ctx, w.cfg, nil)
	if err != nil {
		if ctx.Err() == nil {
			w.res.failures.add("reconnect", err, time.Since(t0))
			time.Sleep(100 * time.Millisecond)
		}
		return false
	}
	atomic.AddInt64(&w.res.reconnects, 1)
	w.conn = conn
	return true
}
