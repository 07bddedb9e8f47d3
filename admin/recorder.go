package admin

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
)

// recentRefusals is how many refused units the status page lists.
const recentRefusals = 20

// Recorder is the admin side of one pgowl: it takes routed units from the
// proxy and serves what operators read. Make it with New.
type Recorder struct {
	src     Sources
	metrics *metrics
	history *History
	series  *series

	refusalsMu sync.Mutex
	refusals   []Unit // the latest refused units, oldest first

	// databases holds a *databaseStats per client database, for SHOW STATS.
	databases sync.Map

	// settings are the configuration and policy in force: src's at first, a reload's after it.
	settings atomic.Pointer[Settings]
	// lifecycle answers RELOAD, PAUSE and RESUME; nil until SetLifecycle.
	lifecycle atomic.Pointer[lifecycleHolder]
}

// Settings are the parts of the configuration the admin side shows, replaced whole by a reload.
type Settings struct {
	Config config.Config
	Policy route.Policy
}

// SetSettings puts the settings of a reloaded configuration in force; counters and history are kept.
func (r *Recorder) SetSettings(s Settings) { r.settings.Store(&s) }

func (r *Recorder) config() config.Config { return r.settings.Load().Config }
func (r *Recorder) policy() route.Policy  { return r.settings.Load().Policy }

// New returns a Recorder reading src; nothing runs until Run.
func New(src Sources) *Recorder {
	if src.Started.IsZero() {
		src.Started = time.Now()
	}
	r := &Recorder{
		src:     src,
		history: NewHistory(src.Config.Admin.HistorySize),
	}
	r.settings.Store(&Settings{Config: src.Config, Policy: src.Policy})
	r.metrics = newMetrics(&r.src, r.policy)
	r.series = newSeries(seriesPoints)
	return r
}

// Routed records one unit: it is counted in the metrics and kept in the
// history. It is called on the proxy's hot path, once per unit.
func (r *Recorder) Routed(u Unit) {
	r.metrics.observe(&u)
	r.history.Add(&u)
	if !u.refused() {
		r.countDatabase(&u)
	}
	if u.refused() {
		r.refusalsMu.Lock()
		if len(r.refusals) == recentRefusals {
			copy(r.refusals, r.refusals[1:])
			r.refusals = r.refusals[:recentRefusals-1]
		}
		r.refusals = append(r.refusals, u)
		r.refusalsMu.Unlock()
	}
}

// SetClients names where the list of connected clients comes from (the
// proxy's server, made after the Recorder); call it before Run.
func (r *Recorder) SetClients(c Clients) { r.src.Clients = c }

// SetVersion sets the version SHOW VERSION and the status page show; call it before Run.
func (r *Recorder) SetVersion(v string) { r.src.Version = v }

// SetShuttingDown names where readiness learns that pgowl drains for a shutdown (the proxy's
// server, made after the Recorder); call it before Run.
func (r *Recorder) SetShuttingDown(f func() bool) { r.src.ShuttingDown = f }

// History is the routing history.
func (r *Recorder) History() *History { return r.history }

// latestRefusals returns the latest refused units, newest first.
func (r *Recorder) latestRefusals() []Unit {
	r.refusalsMu.Lock()
	defer r.refusalsMu.Unlock()
	out := make([]Unit, len(r.refusals))
	for i, u := range r.refusals {
		out[len(out)-1-i] = u
	}
	return out
}

// Run samples the series of the status page and counts promotions and
// timeline changes until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	go r.watchRoles(ctx)
	tick := time.NewTicker(seriesStep)
	defer tick.Stop()
	r.sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			r.sample(now)
		}
	}
}

// Serve runs the admin HTTP listener on ln until ctx ends.
func (r *Recorder) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	err := srv.Serve(ln)
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}

// watchRoles counts promotions (standby, then primary) and timeline changes per node.
func (r *Recorder) watchRoles(ctx context.Context) {
	type seen struct {
		role     route.Role
		timeline uint32
	}
	last := map[string]seen{}
	for ctx.Err() == nil {
		r.src.Nodes.WaitFor(ctx, func(s *route.Snapshot) bool {
			for i := range s.Nodes {
				n := &s.Nodes[i]
				if !n.Up || n.Role == route.RoleUnknown {
					continue
				}
				was, ok := last[n.Name]
				if ok && was.role == route.RoleStandby && n.Role == route.RolePrimary {
					r.metrics.promotions.WithLabelValues(n.Name).Inc()
				}
				if ok && was.timeline != 0 && n.Timeline != 0 && n.Timeline != was.timeline {
					r.metrics.timelines.WithLabelValues(n.Name).Inc()
				}
				timeline := n.Timeline
				if timeline == 0 {
					timeline = was.timeline
				}
				last[n.Name] = seen{role: n.Role, timeline: timeline}
			}
			return false
		})
	}
}
