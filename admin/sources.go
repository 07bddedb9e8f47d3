package admin

import (
	"context"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/route"
)

// NodeStates is what admin needs from the node monitor.
type NodeStates interface {
	// Snapshot returns the latest node states without blocking.
	Snapshot() *route.Snapshot
	// WaitFor blocks until cond holds for a new snapshot or ctx ends.
	WaitFor(ctx context.Context, cond func(*route.Snapshot) bool) bool
}

// PoolStats is what admin needs from the backend pool.
type PoolStats interface {
	NodeStats(node string) pool.NodeStats
}

// CacheStats is what admin needs from the classifier.
type CacheStats interface {
	CacheStats() (hits, misses uint64)
}

// Client is one client connection as the console and the metrics show it.
type Client struct {
	ConnID      uint64
	User        string
	Database    string
	Application string
	// Addr is the client's address: shown in SHOW CLIENTS, never a metric label.
	Addr string
	// ConnectedAt is when the client connected.
	ConnectedAt time.Time
	// Active is true while one of the client's units runs.
	Active bool
	// TLS says whether the client uses TLS.
	TLS bool
}

// Clients lists the connected clients.
type Clients interface {
	Clients() []Client
}

// Sources are what the admin side reads; every field but Clients and Cache is required.
type Sources struct {
	Config  config.Config
	Policy  route.Policy
	Nodes   NodeStates
	Pool    PoolStats
	Cache   CacheStats
	Clients Clients
	// Version is pgowl's version string, for SHOW VERSION and the status page.
	Version string
	// ShuttingDown, when set, reports whether pgowl is draining for a shutdown: it refuses new
	// clients then, so it is not ready, whatever the nodes.
	ShuttingDown func() bool
	// Started is when pgowl started.
	Started time.Time
}
