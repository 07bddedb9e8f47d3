package main

import (
	"context"
	"fmt"
	"time"
)

// idleResult is what the idle test measured.
type idleResult struct {
	target    int
	connected int
	failures  *failureTally
	connect   time.Duration
	// connectCPU is the CPU the connection phase used; connectWatch what sampling saw then.
	connectCPU   cpuUse
	connectWatch *watchStats

	before, after, closed procSample
	// perClientKiB is (after.rss - before.rss) / connected.
	perClientKiB float64
	// backends are the nodes' backends while the clients sat idle.
	backends []nodeCount
	// runtimeBefore and runtimeAfter are the Go runtime's view (after a forced GC); zero when
	// the profile could not be fetched.
	runtimeBefore, runtimeAfter runtimeStats
	runtimeErr                  string
	// closeWait is how long pgowl took to let go of the clients' descriptors after they left.
	closeWait time.Duration
}

// runIdle connects o.idle clients, runs SELECT 1 on each, and measures pgowl while they idle.
func runIdle(ctx context.Context, o options, p *pgowlProcess, counter *nodeCounter, probe *cpuProbe) (*idleResult, error) {
	res := &idleResult{target: o.idle, failures: &failureTally{}}
	cfg, err := p.connConfig()
	if err != nil {
		return nil, err
	}
	// Let the warm-up connection's session end and the monitor settle before the baseline.
	if err := sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	if res.before, err = sampleProc(p.pid); err != nil {
		return nil, err
	}
	logf("idle: pgowl before any client: VmRSS %d KiB, %d fds, %d threads", res.before.rssKiB, res.before.fds, res.before.threads)
	if rs, err := p.fetchRuntimeStats(ctx); err == nil {
		res.runtimeBefore = rs
	} else {
		res.runtimeErr = err.Error()
	}

	show, _, err := connectOne(ctx, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("connect the SHOW pgowl.nodes probe: %w", err)
	}
	defer closeConn(show)
	cpuBefore := probe.snapshot()
	watch := startWatch(ctx, counter, show, p.pid)
	conns, took := connectAll(ctx, cfg, o.idle, o.parallel, "idle", selectOne, res.failures)
	res.connectWatch = watch.finish()
	res.connectCPU = probe.snapshot().since(cpuBefore)
	defer closeAll(conns, o.parallel)
	res.connect = took
	res.connected = countOpen(conns)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := p.checkAlive(); err != nil {
		return nil, err
	}

	logf("idle: %d clients idle; waiting %s before measuring", res.connected, o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return nil, err
	}
	if res.after, err = sampleProc(p.pid); err != nil {
		return nil, err
	}
	if res.connected > 0 {
		res.perClientKiB = float64(res.after.rssKiB-res.before.rssKiB) / float64(res.connected)
	}
	logf("idle: pgowl with %d idle clients: VmRSS %d KiB (%.1f KiB per client), %d fds, %d threads",
		res.connected, res.after.rssKiB, res.perClientKiB, res.after.fds, res.after.threads)
	if res.backends, err = counter.count(ctx); err != nil {
		return nil, err
	}
	for i, c := range res.backends {
		logf("idle: %s holds %d backends of user %s (%d not idle), %d client backends in all",
			counter.nodes[i].Name, c.app, appUser, c.appActive, c.clients)
	}
	// The Go runtime's view comes last: fetching it forces a GC in pgowl.
	if rs, err := p.fetchRuntimeStats(ctx); err == nil {
		res.runtimeAfter = rs
	} else if res.runtimeErr == "" {
		res.runtimeErr = err.Error()
	}

	logf("idle: closing %d clients", res.connected)
	closeAll(conns, o.parallel)
	pooled := 0
	for _, c := range res.backends {
		pooled += c.app
	}
	began := time.Now()
	for time.Since(began) < 15*time.Second {
		s, err := sampleProc(p.pid)
		if err != nil {
			return nil, err
		}
		res.closed = s
		// What stays: the baseline, the pool's connections and the SHOW probe.
		if s.fds <= res.before.fds+pooled+4 {
			break
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	res.closeWait = time.Since(began)
	logf("idle: after the clients left: VmRSS %d KiB, %d fds (%s)", res.closed.rssKiB, res.closed.fds, res.closeWait.Round(time.Millisecond))
	return res, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
