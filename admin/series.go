package admin

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pgowl/pgowl/route"
)

// The status page's series: one point a second for the last five minutes.
const (
	seriesStep   = time.Second
	seriesPoints = 300
)

// point is one second of the status page's series.
type point struct {
	at time.Time
	// lag is each node's effective lag in seconds (lag plus sample age); NaN when unknown or down.
	lag map[string]float64
	// byNode and byReason are the units routed since the previous point.
	byNode, byReason map[string]float64
}

// series keeps the last points, oldest first.
type series struct {
	mu     sync.Mutex
	max    int
	points []point
	// the routed counters' totals at the previous point
	nodeTotals, reasonTotals map[string]float64
}

func newSeries(max int) *series {
	return &series{max: max}
}

// sample adds a point for now.
func (r *Recorder) sample(now time.Time) {
	snap := r.src.Nodes.Snapshot()
	p := point{at: now, lag: map[string]float64{}, byNode: map[string]float64{}, byReason: map[string]float64{}}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		p.lag[n.Name] = effectiveLag(n, now)
	}
	nodeTotals, reasonTotals := routedTotals(r.metrics.routed)
	s := r.series
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodeTotals != nil {
		for k, v := range nodeTotals {
			p.byNode[k] = v - s.nodeTotals[k]
		}
		for k, v := range reasonTotals {
			p.byReason[k] = v - s.reasonTotals[k]
		}
	}
	s.nodeTotals, s.reasonTotals = nodeTotals, reasonTotals
	if len(s.points) == s.max {
		copy(s.points, s.points[1:])
		s.points = s.points[:s.max-1]
	}
	s.points = append(s.points, p)
}

// snapshot returns a copy of the points.
func (s *series) snapshot() []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]point(nil), s.points...)
}

// effectiveLag is a node's lag as routing sees it, in seconds: NaN when unknown or down.
func effectiveLag(n *route.NodeState, now time.Time) float64 {
	if !n.Up || !n.LagKnown || n.SampledAt.IsZero() {
		return math.NaN()
	}
	if n.Role == route.RolePrimary {
		return 0
	}
	return (n.Lag + max(now.Sub(n.SampledAt), 0)).Seconds()
}

// routedTotals sums the routed-units counter by node and by reason.
func routedTotals(vec *prometheus.CounterVec) (byNode, byReason map[string]float64) {
	byNode, byReason = map[string]float64{}, map[string]float64{}
	ch := make(chan prometheus.Metric, 64)
	go func() {
		vec.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil || d.Counter == nil {
			continue
		}
		var node, reason string
		for _, l := range d.Label {
			switch l.GetName() {
			case "node":
				node = l.GetValue()
			case "reason":
				reason = l.GetValue()
			}
		}
		byNode[node] += d.Counter.GetValue()
		byReason[reason] += d.Counter.GetValue()
	}
	return byNode, byReason
}
