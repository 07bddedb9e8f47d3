package admin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the admin HTTP endpoints:
//
//	/metrics   Prometheus exposition
//	/healthz   200 while the process serves
//	/readyz    200 when pgowl can route (see Ready), else 503; JSON either way
//	/history   the routing history as JSON, newest first (?node= &reason= &outcome= &user= &ai=true|false &limit=)
//	/          the status page
func (r *Recorder) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.metrics.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", r.serveReady)
	mux.HandleFunc("GET /history", r.serveHistory)
	mux.HandleFunc("GET /{$}", r.serveStatus)
	return mux
}

func (r *Recorder) serveReady(w http.ResponseWriter, _ *http.Request) {
	ready := readiness(&r.src, r.src.Nodes.Snapshot(), r.policy(), time.Now())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ready.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(ready)
}

// historyEntry is a Unit as /history writes it, with durations in milliseconds.
type historyEntry struct {
	Unit
	LagMS      float64 `json:"lag_ms"`
	DurationMS float64 `json:"duration_ms"`
	DecisionUS float64 `json:"decision_us"`
}

func (r *Recorder) serveHistory(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	f := Filter{Node: q.Get("node"), Reason: q.Get("reason"), Outcome: q.Get("outcome"), User: q.Get("user")}
	if v := q.Get("ai"); v != "" {
		ai, err := strconv.ParseBool(v)
		if err != nil {
			http.Error(w, "ai must be true or false", http.StatusBadRequest)
			return
		}
		f.AI = &ai
	}
	limit := r.history.Size()
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			http.Error(w, "limit must be a number of units", http.StatusBadRequest)
			return
		}
		limit = min(n, limit)
	}
	units := r.history.Latest(f, limit)
	out := make([]historyEntry, len(units))
	for i := range units {
		out[i] = toHistoryEntry(&units[i])
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(struct {
		Size  int            `json:"size"`
		Units []historyEntry `json:"units"`
	}{r.history.Size(), out})
}

func toHistoryEntry(u *Unit) historyEntry {
	return historyEntry{
		Unit:       *u,
		LagMS:      float64(u.Lag.Microseconds()) / 1000,
		DurationMS: float64(u.Duration.Microseconds()) / 1000,
		DecisionUS: float64(u.Decision.Nanoseconds()) / 1000,
	}
}
