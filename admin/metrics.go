package admin

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pgowl/pgowl/route"
)

// metrics are the Prometheus collectors of one pgowl, in a registry of their own.
type metrics struct {
	registry *prometheus.Registry

	routed     *prometheus.CounterVec   // node, role, reason, outcome
	refusals   *prometheus.CounterVec   // code
	duration   *prometheus.HistogramVec // node
	decision   prometheus.Histogram
	promotions *prometheus.CounterVec // node
	timelines  *prometheus.CounterVec // node

	// children caches the routed counter and duration histogram of each
	// label combination (routedKey → *routedChildren): a sync.Map read
	// costs less than the vectors' label hashing and validation, per unit.
	children sync.Map
}

type routedKey struct {
	node    string
	role    route.Role
	reason  string
	outcome string
}

type routedChildren struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

func newMetrics(src *Sources, policy func() route.Policy) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		routed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgowl_routed_units_total",
			Help: "Routed units (a simple Query, or an extended batch up to Sync) by the node that ran them, its role, the routing reason and the outcome (ok or the SQLSTATE of the first error).",
		}, []string{"node", "role", "reason", "outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgowl_refusals_total",
			Help: "Units no node ran, by code: NO_READABLE_REPLICA, REPLICA_LAG_EXCEEDED, NO_PRIMARY, DATABASE_BUSY, or the SQLSTATE pgowl answered.",
		}, []string{"code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pgowl_statement_duration_seconds",
			Help:    "Time from a unit's arrival to its last reply, by the node that ran it.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 4, 10),
		}, []string{"node"}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgowl_routing_decision_seconds",
			Help:    "The routing decision's own time: from a classified unit's arrival to the choice of its node, without waits for a primary or a backend.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 9),
		}),
		promotions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgowl_promotions_total",
			Help: "Nodes seen to become the primary after being seen as a standby.",
		}, []string{"node"}),
		timelines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgowl_timeline_changes_total",
			Help: "Changes of a node's timeline seen by the monitor.",
		}, []string{"node"}),
	}
	m.registry.MustRegister(m.routed, m.refusals, m.duration, m.decision, m.promotions, m.timelines,
		&stateCollector{src: src, policy: policy},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, code := range []route.Code{route.NoReadableReplica, route.ReplicaLagExceeded, route.NoPrimary, route.DatabaseBusy} {
		// Present from the start, so that rate() sees the first refusal.
		m.refusals.WithLabelValues(code.String())
	}
	for _, n := range src.Config.Nodes {
		// Present from the start, so that rate() sees the first promotion.
		m.promotions.WithLabelValues(n.Name)
		m.timelines.WithLabelValues(n.Name)
	}
	return m
}

// observe counts one unit.
func (m *metrics) observe(u *Unit) {
	m.decision.Observe(u.Decision.Seconds())
	if u.refused() {
		m.refusals.WithLabelValues(u.Refusal).Inc()
		return
	}
	key := routedKey{node: u.Node, role: u.Role, reason: u.Reason, outcome: u.Outcome}
	v, ok := m.children.Load(key)
	if !ok {
		v, _ = m.children.LoadOrStore(key, &routedChildren{
			count:    m.routed.WithLabelValues(u.Node, u.Role.String(), u.Reason, u.Outcome),
			duration: m.duration.WithLabelValues(u.Node),
		})
	}
	c := v.(*routedChildren)
	c.count.Inc()
	c.duration.Observe(u.Duration.Seconds())
}

// stateCollector reads the node, pool, client and cache figures at scrape time.
type stateCollector struct {
	src *Sources
	// policy returns the routing policy in force (a reload replaces it).
	policy func() route.Policy
}

var (
	descNodeUp       = prometheus.NewDesc("pgowl_node_up", "1 when the node answered the monitor within monitor.down_after.", []string{"node"}, nil)
	descNodeRole     = prometheus.NewDesc("pgowl_node_role", "1 for the node's current role (primary, standby or unknown).", []string{"node", "role"}, nil)
	descNodeLag      = prometheus.NewDesc("pgowl_node_lag_seconds", "The node's replication lag as measured at its last sample (0 for a primary, NaN when unknown).", []string{"node"}, nil)
	descNodeLagBytes = prometheus.NewDesc("pgowl_node_lag_bytes", "WAL the node had not replayed at its last sample (0 for a primary, NaN when unknown).", []string{"node"}, nil)
	descNodeAge      = prometheus.NewDesc("pgowl_node_sample_age_seconds", "Age of the node's last successful sample (NaN before the first).", []string{"node"}, nil)
	descNodeTimeline = prometheus.NewDesc("pgowl_node_timeline", "The node's timeline.", []string{"node"}, nil)
	descBackends     = prometheus.NewDesc("pgowl_backends", "Backend connections to the node by state (active: in use, idle: pooled).", []string{"node", "state"}, nil)
	descWaiting      = prometheus.NewDesc("pgowl_clients_waiting", "Clients waiting for a backend connection to the node now.", []string{"node"}, nil)
	descWaits        = prometheus.NewDesc("pgowl_backend_waits_total", "Times a client had to wait for a backend connection to the node.", []string{"node"}, nil)
	descClients      = prometheus.NewDesc("pgowl_clients", "Client connections by state (active: a unit runs, idle: between units).", []string{"state"}, nil)
	descCacheHits    = prometheus.NewDesc("pgowl_classify_cache_hits_total", "Classifications answered by the classification cache.", nil, nil)
	descCacheMisses  = prometheus.NewDesc("pgowl_classify_cache_misses_total", "Classifications the cache could not answer (the statement was parsed).", nil, nil)
	descReady        = prometheus.NewDesc("pgowl_ready", "1 when pgowl can route (as /readyz).", nil, nil)
	descTopology     = prometheus.NewDesc("pgowl_topology_source", "1 for where the roles come from now: own_polling, patroni, or patroni_unreachable (Patroni is configured but did not answer: own polling alone).", []string{"source"}, nil)
	descNodeExcluded = prometheus.NewDesc("pgowl_node_excluded", "1 when the topology source keeps every statement from the node (Patroni does not list it, or it says primary while Patroni names another leader).", []string{"node"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodeUp, descNodeRole, descNodeLag, descNodeLagBytes, descNodeAge,
		descNodeTimeline, descBackends, descWaiting, descWaits, descClients, descCacheHits, descCacheMisses, descReady, descTopology, descNodeExcluded} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	snap := c.src.Nodes.Snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, source := range []route.TopologySource{route.TopologyOwnPolling, route.TopologyPatroni, route.TopologyPatroniUnreachable} {
		gauge(descTopology, boolFloat(snap.Topology == source), source.String())
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		gauge(descNodeUp, boolFloat(n.Up), n.Name)
		gauge(descNodeExcluded, boolFloat(n.Excluded != ""), n.Name)
		for _, r := range []route.Role{route.RolePrimary, route.RoleStandby, route.RoleUnknown} {
			gauge(descNodeRole, boolFloat(n.Role == r), n.Name, r.String())
		}
		lag, lagBytes := math.NaN(), math.NaN()
		if n.LagKnown {
			lag, lagBytes = n.Lag.Seconds(), float64(n.LagBytes)
		}
		gauge(descNodeLag, lag, n.Name)
		gauge(descNodeLagBytes, lagBytes, n.Name)
		age := math.NaN()
		if !n.SampledAt.IsZero() {
			age = now.Sub(n.SampledAt).Seconds()
		}
		gauge(descNodeAge, age, n.Name)
		gauge(descNodeTimeline, float64(n.Timeline), n.Name)
		st := c.src.Pool.NodeStats(n.Name)
		gauge(descBackends, float64(st.InUse), n.Name, "active")
		gauge(descBackends, float64(st.Idle), n.Name, "idle")
		gauge(descWaiting, float64(st.Waiting), n.Name)
		ch <- prometheus.MustNewConstMetric(descWaits, prometheus.CounterValue, float64(st.Waits), n.Name)
	}
	if c.src.Clients != nil {
		active, idle := 0, 0
		for _, cl := range c.src.Clients.Clients() {
			if cl.Active {
				active++
			} else {
				idle++
			}
		}
		gauge(descClients, float64(active), "active")
		gauge(descClients, float64(idle), "idle")
	}
	if c.src.Cache != nil {
		hits, misses := c.src.Cache.CacheStats()
		ch <- prometheus.MustNewConstMetric(descCacheHits, prometheus.CounterValue, float64(hits))
		ch <- prometheus.MustNewConstMetric(descCacheMisses, prometheus.CounterValue, float64(misses))
	}
	gauge(descReady, boolFloat(readiness(c.src, snap, c.policy(), now).Ready))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
