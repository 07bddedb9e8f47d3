package config

import "time"

// Config is the complete pgowl configuration, passed down from main to every component.
type Config struct {
	// Listen is the host:port the proxy accepts client connections on.
	Listen string `yaml:"listen" mapstructure:"listen" help:"host:port to accept client connections on"`
	// ListenReusePort binds Listen with SO_REUSEPORT, so that several pgowl processes on one host
	// share the port and the kernel spreads new connections among them.
	ListenReusePort bool `yaml:"listen_reuse_port" mapstructure:"listen_reuse_port" help:"bind listen with SO_REUSEPORT so that several pgowl processes on one host share the port"`
	// Peering lets several pgowl instances pass each other the CancelRequests of their clients.
	Peering Peering `yaml:"peering" mapstructure:"peering"`
	// Nodes lists every PostgreSQL server, whatever its role; roles are discovered, never configured.
	Nodes []Node `yaml:"nodes" mapstructure:"nodes" help:"every PostgreSQL node as a JSON list of {name, host, port}"`
	// Users lists who may connect; the same credentials log in to the nodes.
	Users []User `yaml:"users" mapstructure:"users" help:"who may connect, as a JSON list of {name, password, auth}"`
	// Monitor configures the health and replication-lag checks.
	Monitor Monitor `yaml:"monitor" mapstructure:"monitor"`
	// Routing configures where statements go.
	Routing Routing `yaml:"routing" mapstructure:"routing"`
	// Log configures the process log.
	Log Log `yaml:"log" mapstructure:"log"`
	// TLS configures TLS towards clients and towards the nodes.
	TLS TLS `yaml:"tls" mapstructure:"tls"`
	// Auth configures credentials kept outside the users list: a file of SCRAM verifiers and an auth query.
	Auth Auth `yaml:"auth" mapstructure:"auth"`
	// Access holds the hba-style rules that decide who may log in from where, and how.
	Access Access `yaml:"access" mapstructure:"access"`
	// Limits holds the defences against hostile or runaway clients.
	Limits Limits `yaml:"limits" mapstructure:"limits"`
	// Pool configures the server connection pools, one per node.
	Pool Pool `yaml:"pool" mapstructure:"pool"`
	// TCP configures keepalives and the user timeout of client and node connections.
	TCP TCP `yaml:"tcp" mapstructure:"tcp"`
	// Classify configures the statement classifier.
	Classify Classify `yaml:"classify" mapstructure:"classify"`
	// Admin configures the admin HTTP listener, the routing history and the admin console.
	Admin Admin `yaml:"admin" mapstructure:"admin"`
	// ShutdownTimeout is how long SIGTERM waits for transactions and statements in flight to
	// finish before it rolls back the transactions still open; greater than zero.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" mapstructure:"shutdown_timeout" help:"on SIGTERM, how long transactions in flight may take to finish before they are rolled back"`
	// Topology names an HA manager whose view of the roles pgowl follows.
	Topology Topology `yaml:"topology" mapstructure:"topology"`
	// Guards are the traffic classes refused for plan cost or node load; see Guard.
	Guards []Guard `yaml:"guards" mapstructure:"guards" help:"traffic classes refused for plan cost or node load, as a JSON list of {name, match, max_cost, guard_writes, busy, verdict_cache_ttl}"`
}

// Topology names an HA manager pgowl takes the roles from, besides its own polling.
type Topology struct {
	// Patroni configures Patroni as a topology source.
	Patroni PatroniTopology `yaml:"patroni" mapstructure:"patroni"`
}

// PatroniTopology lists Patroni REST API addresses; empty: pgowl's own polling alone.
type PatroniTopology struct {
	// URLs are Patroni REST API base URLs (http://host:8008), all asked GET /cluster at each
	// read; the first valid answer is used. Nodes are matched to members by host:port, so
	// nodes' host and port must be the members' connect address as Patroni reports it.
	URLs []string `yaml:"urls" mapstructure:"urls" help:"Patroni REST API base URLs as a JSON list (http://host:8008): its leader is the only primary, nodes it does not list get nothing; empty: own polling alone"`
	// CAFile holds the PEM certificates that sign the REST API's certificate, for https:// URLs;
	// empty: the system's roots.
	CAFile string `yaml:"ca_file" mapstructure:"ca_file" help:"PEM CA certificates that sign Patroni's REST API certificate (https:// URLs); empty: the system's roots"`
	// CertFile is the PEM client certificate presented to the REST API (Patroni's
	// restapi.verify_client); KeyFile must be set with it.
	CertFile string `yaml:"cert_file" mapstructure:"cert_file" help:"PEM client certificate presented to Patroni's REST API"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `yaml:"key_file" mapstructure:"key_file" help:"PEM private key of topology.patroni.cert_file"`
}

// Admin configures what operators look at: the HTTP listener (/metrics, /healthz, /readyz,
// /history, the status page), the routing history and the admin console on the PostgreSQL port.
type Admin struct {
	// Listen is the host:port of the admin HTTP listener; empty turns it off.
	Listen string `yaml:"listen" mapstructure:"listen" help:"host:port of the admin HTTP listener (/metrics, /healthz, /readyz, /history, /), empty turns it off"`
	// Users may open the admin console (database pgowl) and run SHOW pgowl.nodes and SHOW
	// pgowl.explain. When empty, nobody may open the console, every logged-in user may run the SHOW
	// commands, and pgowl warns about it at start-up.
	Users []string `yaml:"users" mapstructure:"users" help:"users who may open the admin console (database pgowl) and run SHOW pgowl.nodes / SHOW pgowl.explain, as a JSON list; empty: no console, SHOW commands for everyone"`
	// HistorySize is the number of routed units kept in the routing history; 0 keeps none.
	HistorySize int `yaml:"history_size" mapstructure:"history_size" help:"routed units kept in the routing history, 0 keeps none"`
}

// Peering makes a CancelRequest work through any of several pgowl instances behind one address:
// the BackendKeyData an instance hands out carries its instance number, and an instance that gets
// a cancel carrying another number passes it on to that peer's peering listener.
type Peering struct {
	// Instance is this instance's number, 1..MaxPeerInstance, unique among its peers; 0 turns peering off.
	Instance int `yaml:"instance" mapstructure:"instance" help:"this instance's number among its peers (1..127), 0 turns peering off"`
	// Listen is where this instance takes the cancels its peers pass on; it must be this
	// instance's own address (not a port shared with SO_REUSEPORT).
	Listen string `yaml:"listen" mapstructure:"listen" help:"host:port where this instance takes the cancel requests its peers pass on"`
	// Peers lists the instances; the entry with this instance's own number is ignored, so that
	// every instance can read the same list.
	Peers []Peer `yaml:"peers" mapstructure:"peers" help:"the pgowl instances as a JSON list of {instance, address}; an entry with this instance's number is skipped"`
	// Self, when set, is this instance's own address as the Peers list spells it; the instance
	// number is then taken from that entry, so that replicas reading one configuration differ
	// only by an environment variable (in Kubernetes, PGOWL_PEERING_SELF built from the pod's
	// name, see deploy/kubernetes). Decode fills Instance from it.
	Self string `yaml:"self" mapstructure:"self" help:"this instance's own address in peering.peers; its entry's instance number becomes peering.instance"`
	// TLS secures the cancels this instance passes on to its peers, with tls.nodes' meaning: a
	// cancel carries the secret key of a client's session. The peer's listener offers TLS with
	// its certificate for clients (tls.cert_file) when it has one.
	TLS PeerTLS `yaml:"tls" mapstructure:"tls"`
}

// PeerTLS configures TLS on the connections that pass cancels on to peers (peering.tls); its
// keys mean what tls.nodes' do (NodeTLS, which it converts to).
type PeerTLS struct {
	// SSLMode is libpq's sslmode: SSLDisable, SSLPrefer, SSLRequire, SSLVerifyCA or SSLVerifyFull.
	SSLMode string `yaml:"sslmode" mapstructure:"sslmode" help:"TLS to the peers' peering listeners: disable | prefer | require | verify-ca | verify-full"`
	// CAFile holds the PEM certificates that sign the peers' certificates (their tls.cert_file);
	// verify-ca and verify-full fall back to the system's roots when it is empty.
	CAFile string `yaml:"ca_file" mapstructure:"ca_file" help:"PEM CA certificates that sign the peers' certificates"`
	// CertFile is the PEM client certificate presented to the peers (needed when their
	// tls.client_ca_file makes them ask for one); KeyFile must be set with it.
	CertFile string `yaml:"cert_file" mapstructure:"cert_file" help:"PEM client certificate presented to the peers"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `yaml:"key_file" mapstructure:"key_file" help:"PEM private key of peering.tls.cert_file"`
}

// resolveSelf sets Instance from the Peers entry whose address is Self, when Self is set and
// Instance is not; Validate reports a Self that names no entry or another instance's.
func (p *Peering) resolveSelf() {
	if p.Self == "" || p.Instance != 0 {
		return
	}
	for _, peer := range p.Peers {
		if peer.Address == p.Self {
			p.Instance = peer.Instance
			return
		}
	}
}

// Peer is one pgowl instance that cancels may be passed on to.
type Peer struct {
	// Instance is the peer's peering.instance.
	Instance int `yaml:"instance" mapstructure:"instance"`
	// Address is the peer's peering.listen.
	Address string `yaml:"address" mapstructure:"address"`
}

// MaxPeerInstance is the highest peering.instance: the number takes the top 7 bits of the
// 31-bit process id in BackendKeyData.
const MaxPeerInstance = 127

// AdminDatabase is the database name that opens the admin console instead of a node session.
const AdminDatabase = "pgowl"

// TCP sets how soon a peer that vanished without closing its connection (a host that lost power,
// a cut network) is noticed, on connections to clients and to nodes alike.
type TCP struct {
	// KeepaliveIdle is the idle time before the first keepalive probe; zero turns keepalives off.
	KeepaliveIdle time.Duration `yaml:"keepalive_idle" mapstructure:"keepalive_idle" help:"idle time before the first TCP keepalive probe, 0 turns keepalives off"`
	// KeepaliveInterval is the time between unanswered probes; greater than zero when keepalives are on.
	KeepaliveInterval time.Duration `yaml:"keepalive_interval" mapstructure:"keepalive_interval" help:"time between two unanswered keepalive probes"`
	// KeepaliveCount is how many unanswered probes close the connection; 1..127 when keepalives are on.
	KeepaliveCount int `yaml:"keepalive_count" mapstructure:"keepalive_count" help:"unanswered keepalive probes that close the connection"`
	// UserTimeout is how long sent data may stay unacknowledged before the connection is closed
	// (TCP_USER_TIMEOUT); zero keeps the system's retransmission limit (about 15 minutes on Linux).
	UserTimeout time.Duration `yaml:"user_timeout" mapstructure:"user_timeout" help:"how long sent data may stay unacknowledged before the connection is closed, 0 the system's limit"`
}

// Node is one PostgreSQL server the proxy may route to.
type Node struct {
	// Name identifies the node in logs and NOTICEs; it matches [a-zA-Z0-9_-]+ and is unique.
	Name string `yaml:"name" mapstructure:"name"`
	// Host is the server's host name, IP address or Unix socket directory.
	Host string `yaml:"host" mapstructure:"host"`
	// Port is the server's TCP port, 1..65535.
	Port int `yaml:"port" mapstructure:"port"`
}

// User is one client identity the proxy accepts and uses to log in to the nodes.
type User struct {
	// Name is the PostgreSQL user name; unique among users.
	Name string `yaml:"name" mapstructure:"name"`
	// Password authenticates the client and logs in to the nodes; required unless Auth is trust.
	Password string `yaml:"password" mapstructure:"password"`
	// Auth is how clients authenticate to the proxy: AuthSCRAM, AuthMD5 or AuthTrust.
	Auth string `yaml:"auth" mapstructure:"auth"`
}

// Monitor configures the background checks that discover roles, health and replication lag.
type Monitor struct {
	// User is the PostgreSQL user the monitor logs in as.
	User string `yaml:"user" mapstructure:"user" help:"user the monitor logs in as"`
	// Password is the monitor user's password; empty when the nodes trust it.
	Password string `yaml:"password" mapstructure:"password" help:"password of the monitor user"`
	// Database is the database the monitor connects to.
	Database string `yaml:"database" mapstructure:"database" help:"database the monitor connects to"`
	// Interval is the time between two checks of a node; greater than zero.
	Interval time.Duration `yaml:"interval" mapstructure:"interval" help:"time between two checks of a node"`
	// DownAfter is how long a node may fail its checks before it counts as down; at least Interval.
	DownAfter time.Duration `yaml:"down_after" mapstructure:"down_after" help:"how long a node may fail its checks before it counts as down"`
	// QueryTimeout bounds each monitoring query; greater than zero.
	QueryTimeout time.Duration `yaml:"query_timeout" mapstructure:"query_timeout" help:"time limit of each monitoring query"`
}

// Routing configures how statements are sent to the primary or a standby.
type Routing struct {
	// MaxReplicaLag is the largest replay lag a standby may have and still receive reads; greater than zero.
	MaxReplicaLag time.Duration `yaml:"max_replica_lag" mapstructure:"max_replica_lag" help:"largest replay lag of a standby that still receives reads"`
	// MaxReplicaLagBytes is the largest WAL distance a standby may have and still receive reads; 0 means no byte limit.
	MaxReplicaLagBytes uint64 `yaml:"max_replica_lag_bytes" mapstructure:"max_replica_lag_bytes" format:"size" help:"largest WAL distance of a standby that still receives reads, 0 for no limit (size, e.g. 16MiB)"`
	// Notice adds one NOTICE per routed statement naming the node and the reason.
	Notice bool `yaml:"notice" mapstructure:"notice" help:"send one NOTICE per routed statement"`
	// AICommentPrefix marks statements that start with it as ai=true in the log; empty disables the marking.
	AICommentPrefix string `yaml:"ai_comment_prefix" mapstructure:"ai_comment_prefix" help:"statements starting with this comment are logged with ai=true"`
	// StandbyChoice picks among eligible standbys: StandbyLeastLag, StandbyRoundRobin or StandbyLeastConnections.
	StandbyChoice string `yaml:"standby_choice" mapstructure:"standby_choice" help:"least_lag | round_robin | least_connections"`
	// WhenNoStandby says what happens to a read when no standby is eligible: WhenNoStandbyReject or WhenNoStandbyPrimary.
	WhenNoStandby string `yaml:"when_no_standby" mapstructure:"when_no_standby" help:"reject | primary"`
	// PrimaryWait is how long a statement waits for a primary to appear; zero fails at once.
	PrimaryWait time.Duration `yaml:"primary_wait" mapstructure:"primary_wait" help:"how long a statement waits for a primary to appear"`
	// ReadYourWrites says whose writes a read must see: ReadYourWritesOff, ReadYourWritesSession or ReadYourWritesUser.
	ReadYourWrites string `yaml:"read_your_writes" mapstructure:"read_your_writes" help:"off | session | user: whose last write a read on a standby must see"`
	// ReadYourWritesWait is how long a read waits for a standby to replay the write it must see; zero does not wait.
	ReadYourWritesWait time.Duration `yaml:"read_your_writes_wait" mapstructure:"read_your_writes_wait" help:"how long a read waits for a standby to replay the session's last write"`
	// ReadYourWritesFallback says what a read does when no standby replayed the write in time: WhenNoStandbyPrimary or WhenNoStandbyReject.
	ReadYourWritesFallback string `yaml:"read_your_writes_fallback" mapstructure:"read_your_writes_fallback" help:"primary | reject: where a read goes when no standby replayed the write in time"`
}

// Values of Routing.ReadYourWrites.
const (
	// ReadYourWritesOff lets a read go to any standby within the lag limit, except after the
	// session's own change of a function, view or type, which its reads wait for as in session scope.
	ReadYourWritesOff = "off"
	// ReadYourWritesSession makes a session's reads see the session's own last write.
	ReadYourWritesSession = "session"
	// ReadYourWritesUser makes a session's reads see the last write of any session of the same user and database.
	ReadYourWritesUser = "user"
)

// Log configures the process log.
type Log struct {
	// Level is the lowest level written: LogDebug, LogInfo, LogWarn or LogError.
	Level string `yaml:"level" mapstructure:"level" help:"debug | info | warn | error"`
	// Format is the log encoding: LogJSON or LogConsole.
	Format string `yaml:"format" mapstructure:"format" help:"json | console"`
}

// TLS configures TLS towards clients (both files or neither must be set) and towards the nodes.
type TLS struct {
	// CertFile is the PEM certificate chain presented to clients.
	CertFile string `yaml:"cert_file" mapstructure:"cert_file" help:"PEM certificate chain presented to clients"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `yaml:"key_file" mapstructure:"key_file" help:"PEM private key of tls.cert_file"`
	// ClientMode says whether clients may, must, or must with a verified certificate use TLS:
	// ClientTLSDisable, ClientTLSAllow, ClientTLSPrefer, ClientTLSRequire, ClientTLSVerifyCA or ClientTLSVerifyFull.
	ClientMode string `yaml:"client_mode" mapstructure:"client_mode" help:"disable | allow | prefer | require | verify-ca | verify-full"`
	// ClientCAFile holds the PEM certificates that sign client certificates; needed by verify-ca,
	// verify-full and the cert access method.
	ClientCAFile string `yaml:"client_ca_file" mapstructure:"client_ca_file" help:"PEM CA certificates that sign client certificates"`
	// MinVersion is the oldest TLS version accepted from clients: TLSVersion12 or TLSVersion13.
	MinVersion string `yaml:"min_version" mapstructure:"min_version" help:"oldest TLS version accepted from clients: 1.2 | 1.3"`
	// CipherSuites restricts the TLS 1.2 cipher suites offered to clients, by their IANA names; empty
	// keeps Go's secure defaults. TLS 1.3 suites are not configurable.
	CipherSuites []string `yaml:"cipher_suites" mapstructure:"cipher_suites" help:"TLS 1.2 cipher suites for clients as a JSON list of IANA names, empty for Go's defaults"`
	// Nodes configures TLS on every connection pgowl opens to a node.
	Nodes NodeTLS `yaml:"nodes" mapstructure:"nodes"`
}

// NodeTLS configures TLS on every connection to a node: the pool's, the monitor's and the catalogue loader's.
type NodeTLS struct {
	// SSLMode is libpq's sslmode: SSLDisable, SSLPrefer, SSLRequire, SSLVerifyCA or SSLVerifyFull.
	SSLMode string `yaml:"sslmode" mapstructure:"sslmode" help:"disable | prefer | require | verify-ca | verify-full"`
	// CAFile holds the PEM certificates that sign the nodes' certificates; verify-ca and verify-full
	// fall back to the system's roots when it is empty.
	CAFile string `yaml:"ca_file" mapstructure:"ca_file" help:"PEM CA certificates that sign the nodes' certificates"`
	// CertFile is the PEM client certificate pgowl presents to the nodes; KeyFile must be set with it.
	CertFile string `yaml:"cert_file" mapstructure:"cert_file" help:"PEM client certificate presented to the nodes"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `yaml:"key_file" mapstructure:"key_file" help:"PEM private key of tls.nodes.cert_file"`
}

// Limits holds the bounds that protect the proxy from hostile or runaway clients.
type Limits struct {
	// MaxMessageSize is the largest protocol message accepted, in bytes; at least 1KiB.
	MaxMessageSize int `yaml:"max_message_size" mapstructure:"max_message_size" format:"size" help:"largest protocol message accepted (size, e.g. 64MiB)"`
	// StartupTimeout bounds the time from accept to the end of authentication; greater than zero.
	StartupTimeout time.Duration `yaml:"startup_timeout" mapstructure:"startup_timeout" help:"time limit from accept to the end of authentication"`
	// MaxClientConnections caps concurrent logged-in client connections; at least 1. Logins in
	// progress count against MaxLoginsInProgress instead.
	MaxClientConnections int `yaml:"max_client_connections" mapstructure:"max_client_connections" help:"most concurrent logged-in client connections"`
	// MaxLoginsInProgress caps the connections still logging in (from accept to the end of
	// authentication and the first node login); at least 1.
	MaxLoginsInProgress int `yaml:"max_logins_in_progress" mapstructure:"max_logins_in_progress" help:"most connections logging in at once"`
	// MaxLoginsInProgressPerAddress is the share of MaxLoginsInProgress one client IP address may
	// hold; 1..MaxLoginsInProgress.
	MaxLoginsInProgressPerAddress int `yaml:"max_logins_in_progress_per_address" mapstructure:"max_logins_in_progress_per_address" help:"most connections logging in at once from one client address"`
	// MaxPreparedStatements caps the named prepared statements one session keeps; at least 1.
	MaxPreparedStatements int `yaml:"max_prepared_statements" mapstructure:"max_prepared_statements" help:"most named prepared statements one session keeps"`
	// MaxPreparedStatementBytes caps the total size of one session's prepared statements (their
	// Parse messages); at least 1KiB.
	MaxPreparedStatementBytes int `yaml:"max_prepared_statement_bytes" mapstructure:"max_prepared_statement_bytes" format:"size" help:"total size of one session's prepared statements (size, e.g. 16MiB)"`
	// QueryTimeout cancels a statement on its node when its reply has not ended after this long,
	// as statement_timeout does; zero means no limit.
	QueryTimeout time.Duration `yaml:"query_timeout" mapstructure:"query_timeout" help:"cancel a statement that runs longer, 0 never"`
	// IdleTransactionTimeout closes a session that stays idle inside a transaction for longer, as
	// idle_in_transaction_session_timeout does; zero means no limit.
	IdleTransactionTimeout time.Duration `yaml:"idle_transaction_timeout" mapstructure:"idle_transaction_timeout" help:"close a session idle in a transaction for longer, 0 never"`
	// FirstReplyTimeout is how long a statement waits for the first reply of a node that the
	// monitor has meanwhile found unresponsive: a read is then sent to another node, anything else
	// ends with 08006. Zero waits for the connection's own timeouts.
	FirstReplyTimeout time.Duration `yaml:"first_reply_timeout" mapstructure:"first_reply_timeout" help:"move a statement away from a node the monitor finds unresponsive after waiting this long for its first reply, 0 never"`
}

// Pool configures the pools of server connections, one pool per node.
type Pool struct {
	// Mode says when a server connection returns to the pool: PoolTransaction or PoolSession.
	Mode string `yaml:"mode" mapstructure:"mode" help:"transaction | session"`
	// MaxPerNode caps the server connections to one node; at least 1.
	MaxPerNode int `yaml:"max_per_node" mapstructure:"max_per_node" help:"most server connections to one node"`
	// MinIdle is the number of idle connections kept open to a node for each login that has
	// used the node (at most 64 logins per node are remembered); 0..MaxPerNode.
	MinIdle int `yaml:"min_idle" mapstructure:"min_idle" help:"idle server connections kept open per node and login"`
	// IdleTimeout closes connections idle for longer; zero keeps them.
	IdleTimeout time.Duration `yaml:"idle_timeout" mapstructure:"idle_timeout" help:"close server connections idle for longer, 0 never"`
	// MaxLifetime closes connections older than this once they are idle; zero means no limit.
	MaxLifetime time.Duration `yaml:"max_lifetime" mapstructure:"max_lifetime" help:"close server connections older than this, 0 never"`
	// HealthCheckAfter is how long a connection may sit idle before it is checked with an empty
	// query when it is handed out; zero never checks.
	HealthCheckAfter time.Duration `yaml:"health_check_after" mapstructure:"health_check_after" help:"check a server connection idle for longer before handing it out, 0 never"`
	// AcquireTimeout bounds the wait for a free server connection; greater than zero.
	AcquireTimeout time.Duration `yaml:"acquire_timeout" mapstructure:"acquire_timeout" help:"time limit to get a server connection from the pool"`
	// DialTimeout bounds opening and authenticating a new server connection; greater than zero.
	DialTimeout time.Duration `yaml:"dial_timeout" mapstructure:"dial_timeout" help:"time limit to open a new server connection"`
}

// Classify configures the statement classifier that decides read or write.
type Classify struct {
	// MaxDepth bounds the parse-tree depth examined; deeper statements count as writes. At least 1.
	MaxDepth int `yaml:"max_depth" mapstructure:"max_depth" help:"deepest parse tree examined; deeper statements go to the primary"`
	// RefreshInterval is how old the function catalogue may grow, since its last whole read, before it
	// is read whole again from the primary; greater than zero.
	RefreshInterval time.Duration `yaml:"refresh_interval" mapstructure:"refresh_interval" help:"how old the function catalogue may grow before it is read whole again"`
	// ChangePollInterval is how often the primary is asked which catalogue rows were written
	// since it was last asked, so that a change made past pgowl is read within it; 0 turns the
	// polls off (such changes are then found by the next whole reload).
	ChangePollInterval time.Duration `yaml:"change_poll_interval" mapstructure:"change_poll_interval" help:"how often catalogue changes made past pgowl are looked for on the primary, 0 only at refresh_interval"`
	// CacheSize is the number of classified statements remembered; 0 disables the cache.
	CacheSize int `yaml:"cache_size" mapstructure:"cache_size" help:"classified statements remembered, 0 disables the cache"`
	// Functions overrides what the catalogue says about particular functions.
	Functions ClassifyFunctions `yaml:"functions" mapstructure:"functions"`
}

// ClassifyFunctions lists functions whose effect is declared rather than taken from the catalogue.
type ClassifyFunctions struct {
	// Readonly lists functions that never write, as schema.name(argtypes) or name(argtypes).
	Readonly []string `yaml:"readonly" mapstructure:"readonly" help:"functions that never write, as a JSON list of \"schema.name(argtypes)\""`
	// Writes lists functions that write, as schema.name(argtypes) or name(argtypes).
	Writes []string `yaml:"writes" mapstructure:"writes" help:"functions that write, as a JSON list of \"schema.name(argtypes)\""`
}

// Values of User.Auth.
const (
	// AuthSCRAM asks clients for a SCRAM-SHA-256 exchange.
	AuthSCRAM = "scram-sha-256"
	// AuthMD5 asks clients for an MD5-hashed password.
	AuthMD5 = "md5"
	// AuthTrust lets clients in without a password.
	AuthTrust = "trust"
)

// Values of Routing.StandbyChoice.
const (
	// StandbyLeastLag sends a read to the eligible standby with the smallest lag.
	StandbyLeastLag = "least_lag"
	// StandbyRoundRobin spreads reads over eligible standbys in turn.
	StandbyRoundRobin = "round_robin"
	// StandbyLeastConnections sends a read to the eligible standby with the fewest busy connections.
	StandbyLeastConnections = "least_connections"
)

// Values of Routing.WhenNoStandby.
const (
	// WhenNoStandbyReject fails a read when no standby is eligible.
	WhenNoStandbyReject = "reject"
	// WhenNoStandbyPrimary sends a read to the primary when no standby is eligible.
	WhenNoStandbyPrimary = "primary"
)

// Values of Log.Level.
const (
	// LogDebug writes every log event.
	LogDebug = "debug"
	// LogInfo writes informational events and above.
	LogInfo = "info"
	// LogWarn writes warnings and errors.
	LogWarn = "warn"
	// LogError writes errors only.
	LogError = "error"
)

// Values of Log.Format.
const (
	// LogJSON writes one JSON object per line.
	LogJSON = "json"
	// LogConsole writes human-readable, coloured lines.
	LogConsole = "console"
)

// Values of Pool.Mode.
const (
	// PoolTransaction returns a server connection to the pool at the end of each transaction.
	PoolTransaction = "transaction"
	// PoolSession keeps a server connection for the whole client session.
	PoolSession = "session"
)

// DefaultNodePort is the port of a node whose port is not given.
const DefaultNodePort = 5432

// Default returns the configuration with every default filled in and no nodes or users.
func Default() Config {
	return Config{
		Listen: "127.0.0.1:6432",
		Monitor: Monitor{
			User:         "postgres",
			Database:     "postgres",
			Interval:     250 * time.Millisecond,
			DownAfter:    time.Second,
			QueryTimeout: 500 * time.Millisecond,
		},
		Routing: Routing{
			MaxReplicaLag:   5 * time.Second,
			Notice:          true,
			AICommentPrefix: "/* owlai */",
			StandbyChoice:   StandbyLeastLag,
			WhenNoStandby:   WhenNoStandbyReject,
			PrimaryWait:     2 * time.Second,

			ReadYourWrites:         ReadYourWritesSession,
			ReadYourWritesWait:     DefaultReadYourWritesWait,
			ReadYourWritesFallback: WhenNoStandbyPrimary,
		},
		Log:             Log{Level: LogInfo, Format: LogJSON},
		ShutdownTimeout: 30 * time.Second,
		TLS: TLS{
			ClientMode: ClientTLSPrefer,
			MinVersion: TLSVersion12,
			Nodes:      NodeTLS{SSLMode: SSLPrefer},
		},
		Peering: Peering{TLS: PeerTLS{SSLMode: SSLPrefer}},
		Auth: Auth{
			QueryUser:     "postgres",
			QueryDatabase: "postgres",
			Query:         DefaultAuthQuery,
			CacheTTL:      10 * time.Second,
		},
		Limits: Limits{
			MaxMessageSize:       64 << 20,
			StartupTimeout:       10 * time.Second,
			MaxClientConnections: 10000,

			MaxLoginsInProgress:           1000,
			MaxLoginsInProgressPerAddress: 100,
			MaxPreparedStatements:         1000,
			MaxPreparedStatementBytes:     16 << 20,
			FirstReplyTimeout:             time.Second,
		},
		Pool: Pool{
			Mode:             PoolTransaction,
			MaxPerNode:       40,
			IdleTimeout:      5 * time.Minute,
			MaxLifetime:      time.Hour,
			HealthCheckAfter: 30 * time.Second,
			AcquireTimeout:   2 * time.Second,
			DialTimeout:      5 * time.Second,
		},
		Classify: Classify{
			MaxDepth:           16,
			RefreshInterval:    30 * time.Second,
			ChangePollInterval: time.Second,
			CacheSize:          10000,
		},
		Admin: Admin{
			Listen:      "127.0.0.1:6480",
			HistorySize: 10000,
		},
		TCP: TCP{
			KeepaliveIdle:     10 * time.Second,
			KeepaliveInterval: 5 * time.Second,
			KeepaliveCount:    3,
			UserTimeout:       30 * time.Second,
		},
	}
}

// setDefaults fills the fields a list item of nodes may omit.
func (n *Node) setDefaults() { n.Port = DefaultNodePort }

// setDefaults fills the fields a list item of users may omit.
func (u *User) setDefaults() { u.Auth = AuthSCRAM }

// listItemDefaulter is implemented by list item types whose omitted fields have defaults.
type listItemDefaulter interface{ setDefaults() }

// DefaultReadYourWritesWait is routing.read_your_writes_wait's default.
// Measured on the test harness (one primary, two local streaming standbys,
// a loaded 2-core machine), a standby replayed a commit made with
// synchronous_commit = on after 1.9ms (p50), 7.7ms (p90) and 42ms (p99):
// 20ms lets most reads right after a write stay on a standby, and bounds
// what one costs when none catches up. A commit with synchronous_commit =
// off reaches no standby before the WAL writer flushes it (about 200ms,
// wal_writer_delay): such a read does not wait at all (see the README).
const DefaultReadYourWritesWait = 20 * time.Millisecond
