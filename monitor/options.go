package monitor

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/nodetls"
	"github.com/pgowl/pgowl/tcpopt"
)

// NodeAddr names one node to monitor and where it listens.
type NodeAddr struct {
	// Name is the node's name in snapshots, logs and notices, such as "pg1".
	Name string
	// Host is the node's host name or IP address; "localhost" when empty.
	Host string
	// Port is the node's TCP port; 5432 when zero.
	Port int
}

// Options configures a Monitor. Zero durations and sizes take the defaults
// given on each field.
type Options struct {
	// Nodes lists the nodes to monitor, in the order snapshots list them.
	Nodes []NodeAddr
	// User is the role the monitor connects as; it needs no privileges beyond
	// CONNECT, since the functions it calls are open to every role.
	User string
	// Password is User's password, if the nodes ask for one.
	Password string
	// TLS is how the monitor's connections are secured (tls.nodes); the zero value is sslmode=prefer.
	TLS nodetls.Settings
	// TCP sets keepalives and the user timeout of the monitor's connections (tcp.*), so that a
	// node that went silent without closing them is noticed as on the pool's; the zero value
	// keeps the system's defaults.
	TCP tcpopt.Options
	// Database is the database the monitor connects to; "postgres" when empty.
	Database string
	// Interval is the time between polling rounds; 1s by default.
	Interval time.Duration
	// DownAfter is how long a node may go without answering before it is
	// marked down; 3*Interval + QueryTimeout by default.
	DownAfter time.Duration
	// QueryTimeout bounds each poll's query; Interval by default, at most 5s.
	QueryTimeout time.Duration
	// DialTimeout bounds each connection attempt; QueryTimeout by default.
	DialTimeout time.Duration
	// Logger receives one line per node state change.
	Logger zerolog.Logger
	// HistorySize is how many primary samples are kept for lag measurement;
	// by default enough for two minutes at Interval, and never fewer than 16.
	HistorySize int
	// Connections, when set, reports the backend connections in use and idle
	// per node; each snapshot carries them for the least_connections choice.
	Connections func(node string) (inUse, idle int)
	// ConnectionLost, when set, is called (from the node's polling goroutine)
	// each time a poll of the node fails on an open connection, which is then
	// closed: a restart or a crash of the node may have closed every other
	// connection to it too, such as the pool's idle ones.
	ConnectionLost func(node string)
	// PatroniURLs, when set, are Patroni REST API base URLs (http://host:8008) whose GET
	// /cluster names the leader and the members (see patroni.go).
	PatroniURLs []string
	// PatroniTLS verifies https:// Patroni URLs with a CA of its own and presents a client
	// certificate (Patroni's restapi.verify_client); the files are read again at each read of
	// /cluster, so a renewed certificate needs no restart. The zero value uses the system's roots.
	PatroniTLS PatroniTLS
}

// PatroniTLS names the PEM files for Patroni's REST API over https: CAFile signs its
// certificate (empty: the system's roots); CertFile and KeyFile, set together, are the client
// certificate pgowl presents.
type PatroniTLS struct {
	CAFile, CertFile, KeyFile string
}

const (
	defaultInterval    = time.Second
	maxDefaultTimeout  = 5 * time.Second
	defaultDatabase    = "postgres"
	defaultHost        = "localhost"
	defaultPort        = 5432
	historySpan        = 2 * time.Minute
	minHistorySize     = 16
	maxDialBackoffBase = 2 * time.Second
)

// withDefaults returns opts with every unset field filled in.
func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = defaultInterval
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = min(o.Interval, maxDefaultTimeout)
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = o.QueryTimeout
	}
	if o.DownAfter <= 0 {
		o.DownAfter = 3*o.Interval + o.QueryTimeout
	}
	if o.Database == "" {
		o.Database = defaultDatabase
	}
	if o.HistorySize <= 0 {
		o.HistorySize = int(historySpan/o.Interval) + 1
	}
	o.HistorySize = max(o.HistorySize, minHistorySize)
	nodes := make([]NodeAddr, len(o.Nodes))
	for i, n := range o.Nodes {
		if n.Host == "" {
			n.Host = defaultHost
		}
		if n.Port == 0 {
			n.Port = defaultPort
		}
		nodes[i] = n
	}
	o.Nodes = nodes
	return o
}

// maxDialBackoff is the longest wait between connection attempts to a node
// that does not answer.
func (o Options) maxDialBackoff() time.Duration {
	return max(o.Interval, maxDialBackoffBase)
}
