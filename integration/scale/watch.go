package main

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// sampleInterval is how often a phase is watched.
const sampleInterval = 500 * time.Millisecond

// watchStats is what watching a phase saw, per node in node order where it is a slice.
type watchStats struct {
	// From the nodes, through this command's superuser connections.
	samples                          int
	maxApp, maxAppActive, maxClients []int
	meanApp                          []float64
	sumApp                           []int
	// nodeQueryMax is the slowest backend count query per node: how fast a node answers
	// a trivial query from outside pgowl.
	nodeQueryMax []time.Duration
	sampleErr    string

	// From pgowl itself, through one client running SHOW pgowl.nodes (answered by pgowl,
	// no backend involved).
	probes     int
	probeLat   []time.Duration
	probeSum   latencies
	maxAgeMS   []int64 // largest sample_age_ms: how stale the monitor's last sample was
	down       []int   // samples in which pgowl showed the node as down
	lagUnknown []int   // samples in which a standby's lag was unknown to pgowl
	maxInUse   []int   // largest in_use: backends checked out of pgowl's pool
	sumInUse   []int
	meanInUse  []float64
	probeErr   string

	// From /proc.
	peakRSSKiB int64
	maxFds     int
}

// watcher samples the nodes, pgowl's view of them and pgowl's process until stopped.
type watcher struct {
	stop  chan struct{}
	done  chan struct{}
	stats *watchStats
}

// startWatch begins sampling; probe may be nil.
func startWatch(ctx context.Context, counter *nodeCounter, probe *pgconn.PgConn, pid int) *watcher {
	n := len(counter.nodes)
	s := &watchStats{
		maxApp: make([]int, n), maxAppActive: make([]int, n), maxClients: make([]int, n), meanApp: make([]float64, n),
		sumApp: make([]int, n), nodeQueryMax: make([]time.Duration, n),
		maxAgeMS: make([]int64, n), down: make([]int, n), lagUnknown: make([]int, n), maxInUse: make([]int, n),
		sumInUse: make([]int, n), meanInUse: make([]float64, n),
	}
	w := &watcher{stop: make(chan struct{}), done: make(chan struct{}), stats: s}
	index := map[string]int{}
	for i, node := range counter.nodes {
		index[node.Name] = i
	}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(sampleInterval)
		defer tick.Stop()
		for {
			s.sampleNodes(ctx, counter)
			if probe != nil {
				s.probePgowl(ctx, probe, index)
			}
			if ps, err := sampleProc(pid); err == nil {
				s.peakRSSKiB = max(s.peakRSSKiB, ps.rssKiB)
				s.maxFds = max(s.maxFds, ps.fds)
			}
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// finish stops sampling and returns what was seen.
func (w *watcher) finish() *watchStats {
	close(w.stop)
	<-w.done
	s := w.stats
	if s.samples > 0 {
		for i := range s.sumApp {
			s.meanApp[i] = float64(s.sumApp[i]) / float64(s.samples)
		}
	}
	if s.probes > 0 {
		for i := range s.sumInUse {
			s.meanInUse[i] = float64(s.sumInUse[i]) / float64(s.probes)
		}
	}
	s.probeSum = summarize(s.probeLat)
	return s
}

func (s *watchStats) sampleNodes(ctx context.Context, counter *nodeCounter) {
	counts, took, err := counter.countTimed(ctx)
	if err != nil {
		if s.sampleErr == "" {
			s.sampleErr = err.Error()
		}
		return
	}
	s.samples++
	for i, c := range counts {
		s.maxApp[i] = max(s.maxApp[i], c.app)
		s.maxAppActive[i] = max(s.maxAppActive[i], c.appActive)
		s.maxClients[i] = max(s.maxClients[i], c.clients)
		s.sumApp[i] += c.app
		s.nodeQueryMax[i] = max(s.nodeQueryMax[i], took[i])
	}
}

// probePgowl runs SHOW pgowl.nodes: columns name, address, role, state, lag_ms, lag_bytes,
// sample_age_ms, timeline, in_use, idle.
func (s *watchStats) probePgowl(ctx context.Context, probe *pgconn.PgConn, index map[string]int) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t0 := time.Now()
	results, err := probe.Exec(qctx, "SHOW pgowl.nodes").ReadAll()
	lat := time.Since(t0)
	if err != nil {
		if s.probeErr == "" {
			s.probeErr = errorText(err)
		}
		return
	}
	if len(results) != 1 {
		return
	}
	s.probes++
	s.probeLat = append(s.probeLat, lat)
	for _, row := range results[0].Rows {
		if len(row) < 10 {
			continue
		}
		i, ok := index[string(row[0])]
		if !ok {
			continue
		}
		if string(row[3]) != "up" {
			s.down[i]++
		}
		if string(row[2]) == "standby" && len(row[4]) == 0 {
			s.lagUnknown[i]++
		}
		if age, err := strconv.ParseInt(string(row[6]), 10, 64); err == nil {
			s.maxAgeMS[i] = max(s.maxAgeMS[i], age)
		}
		if inUse, err := strconv.Atoi(string(row[8])); err == nil {
			s.maxInUse[i] = max(s.maxInUse[i], inUse)
			s.sumInUse[i] += inUse
		}
	}
}
