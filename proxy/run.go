package proxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/admin"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/monitor"
	"github.com/pgowl/pgowl/nodetls"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/access"
	"github.com/pgowl/pgowl/proxy/auth"
	"github.com/pgowl/pgowl/route"
)

// Instance is a whole pgowl wired from a configuration: the node monitor,
// the backend pool, the classifier and the client-facing server.
type Instance struct {
	Server  *Server
	Monitor *monitor.Monitor
	Pool    *pool.Pool
	// Admin records routed units and serves the admin listener and console;
	// nil when admin.listen is empty and admin.users is too.
	Admin *admin.Recorder
	// adminListener is bound by Build (so that port 0 and errors are known
	// early) and served by Run; nil when admin.listen is empty.
	adminListener net.Listener
	// nodes is the monitor in use: a reload that changes the node list swaps it.
	nodes *switchableNodes
	log   zerolog.Logger

	// reloading serialises reloads; cfg is the configuration in force, guarded by it.
	reloading sync.Mutex
	cfg       config.Config
	// authLookup is the auth query's lookup (auth.query_enabled), nil without it; a reload keeps it.
	authLookup func(user string) (*auth.Credentials, bool)
	// configSource re-reads the configuration for RELOAD; nil when there is nothing to re-read.
	configSource func() (config.Config, error)
	// configApplied runs after a reload put a configuration in force.
	configApplied func(config.Config)
	// monitorCtx is the context monitors run on, set by Run; stopMonitor stops the one in use.
	monitorCtx  context.Context
	stopMonitor context.CancelFunc
	// peerListener takes the cancels peers pass on (peering.listen); bound by Build, served
	// by Run, nil when peering is off.
	peerListener net.Listener
	// standbyDefaults follows the changes of default search_path until the standbys replayed
	// them (retireOnStandbyReplay).
	standbyDefaults *standbyDefaults
}

// newMonitor builds a node monitor for the nodes of cfg.
func newMonitor(cfg config.Config, backends *pool.Pool, logger zerolog.Logger) *monitor.Monitor {
	nodes := make([]monitor.NodeAddr, 0, len(cfg.Nodes))
	for _, n := range cfg.Nodes {
		nodes = append(nodes, monitor.NodeAddr{Name: n.Name, Host: n.Host, Port: n.Port})
	}
	return monitor.New(monitor.Options{
		Nodes:        nodes,
		User:         cfg.Monitor.User,
		Password:     cfg.Monitor.Password,
		Database:     cfg.Monitor.Database,
		TLS:          nodetls.FromConfig(cfg.TLS.Nodes),
		TCP:          TCPOptions(cfg.TCP),
		Interval:     cfg.Monitor.Interval,
		DownAfter:    cfg.Monitor.DownAfter,
		QueryTimeout: cfg.Monitor.QueryTimeout,
		// A dial may take longer than a query under load; a node is down only after down_after anyway.
		DialTimeout: cfg.Monitor.DownAfter,
		// Snapshots carry pool counts for routing.standby_choice: least_connections.
		Connections: backends.Stats,
		// A node that dropped the monitor's connection (a restart, a crash
		// restart) may have dropped the pool's idle ones: check them before use.
		ConnectionLost: backends.Suspect,
		PatroniURLs:    cfg.Topology.Patroni.URLs,
		PatroniTLS: monitor.PatroniTLS{CAFile: cfg.Topology.Patroni.CAFile,
			CertFile: cfg.Topology.Patroni.CertFile, KeyFile: cfg.Topology.Patroni.KeyFile},
		Logger: logger.With().Str("component", "monitor").Logger(),
	})
}

// buildCredentials returns the credentials of the users list and of auth.users_file.
func buildCredentials(cfg config.Config, logger zerolog.Logger) ([]*auth.Credentials, error) {
	var creds []*auth.Credentials
	for _, u := range cfg.Users {
		method, err := auth.ParseMethod(u.Auth)
		if err != nil {
			return nil, fmt.Errorf("users %q: %w", u.Name, err)
		}
		c, err := auth.NewCredentials(u.Name, u.Password, method)
		if err != nil {
			return nil, fmt.Errorf("users %q: %w", u.Name, err)
		}
		if method == auth.MethodTrust && u.Password != "" {
			logger.Warn().Str("user", u.Name).Msg("users: auth is trust and a password is set: clients log in as this user without a password; the password only logs pgowl in to the nodes")
		}
		creds = append(creds, c)
	}
	if cfg.Auth.UsersFile != "" {
		fileCreds, err := readUsersFile(cfg, logger)
		if err != nil {
			return nil, err
		}
		creds = append(creds, fileCreds...)
	}
	return creds, nil
}

// Build wires an Instance from cfg. Nothing runs until Run.
func Build(cfg config.Config, logger zerolog.Logger) (*Instance, error) {
	creds, err := buildCredentials(cfg, logger)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := ClientTLSConfig(cfg.TLS)
	if err != nil {
		return nil, err
	}
	if cfg.Peering.Instance != 0 {
		// The files are read at each cancel passed on, which is no time to find them broken.
		if err := nodetls.ForPeers(cfg.Peering.TLS).Check(); err != nil {
			return nil, err
		}
	}
	accessRules, err := access.Compile(cfg.Access.Rules)
	if err != nil {
		return nil, err
	}
	if len(cfg.Admin.Users) == 0 {
		logger.Warn().Msg("admin.users is empty: every logged-in user may run SHOW pgowl.nodes and SHOW pgowl.explain")
	}
	backends := pool.New(pool.Options{
		MaxPerNode:       cfg.Pool.MaxPerNode,
		AcquireTimeout:   cfg.Pool.AcquireTimeout,
		DialTimeout:      cfg.Pool.DialTimeout,
		IdleTimeout:      cfg.Pool.IdleTimeout,
		MaxLifetime:      cfg.Pool.MaxLifetime,
		MinIdle:          cfg.Pool.MinIdle,
		HealthCheckAfter: cfg.Pool.HealthCheckAfter,
		MaxMessageSize:   cfg.Limits.MaxMessageSize,
		TCP:              TCPOptions(cfg.TCP),
		TLS:              nodetls.FromConfig(cfg.TLS.Nodes),
	})
	first := newMonitor(cfg, backends, logger)
	mon := newSwitchableNodes(first)
	var authLookup func(string) (*auth.Credentials, bool)
	var lookups *authQuery
	store := auth.NewStore(creds...)
	if cfg.Auth.QueryEnabled {
		lookups = newAuthQuery(mon, logger)
		authLookup = lookups.lookup
		store = store.WithLookup(authLookup)
	}
	definitions := &definitionChanges{}
	replays := &standbyDefaults{}
	classifier := newClassifier(cfg, mon, logger, definitions, func(database string) {
		// Pooled connections keep the defaults of their login (the search_path the catalogue
		// classifies with among them); new ones get the new ones, on a standby once it has
		// replayed them.
		logger.Info().Str("database", database).Msg("a role's or the database's default settings changed: pooled connections to it are replaced")
		replays.noticed(database, time.Now())
		backends.RetireDatabase(database)
	})
	opts := Options{
		Config:      cfg,
		Logger:      logger,
		Nodes:       mon,
		Classifier:  classifier,
		Pool:        backends,
		Auth:        store,
		TLS:         tlsConfig,
		Access:      accessRules,
		definitions: definitions,
	}
	var recorder *admin.Recorder
	if cfg.Admin.Listen != "" || len(cfg.Admin.Users) > 0 {
		recorder = admin.New(admin.Sources{
			Config: cfg,
			Policy: PolicyFromConfig(cfg),
			Nodes:  mon,
			Pool:   backends,
			Cache:  classifier,
		})
		opts.Observer, opts.Console, opts.ConsoleAuth = recorder, recorder, consoleAuthStore(cfg, creds)
	}
	srv, err := NewServer(opts)
	if err != nil {
		backends.Close() // stops its maintenance goroutine
		return nil, err
	}
	if lookups != nil {
		// Before Run: no login looks a user up until the server serves.
		lookups.settings = func() config.Config { return srv.live().cfg }
	}
	in := &Instance{Server: srv, Monitor: first, Pool: backends, Admin: recorder, nodes: mon, authLookup: authLookup, cfg: cfg, log: logger,
		standbyDefaults: replays}
	if recorder != nil {
		recorder.SetClients(srv)
		recorder.SetShuttingDown(srv.shutdown.draining.Load)
		recorder.SetLifecycle(in)
	}
	if cfg.Admin.Listen != "" {
		if in.adminListener, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
			backends.Close()
			return nil, fmt.Errorf("admin.listen: %w", err)
		}
	}
	if cfg.Peering.Instance != 0 {
		if in.peerListener, err = net.Listen("tcp", cfg.Peering.Listen); err != nil {
			backends.Close()
			if in.adminListener != nil {
				in.adminListener.Close()
			}
			return nil, fmt.Errorf("peering.listen: %w", err)
		}
	}
	return in, nil
}

// Nodes returns the node states in use; unlike Monitor, it follows a reload that swaps the monitor.
func (in *Instance) Nodes() NodeStates { return in.nodes }

// AdminAddr is the admin HTTP listener's address, nil when it is off.
func (in *Instance) AdminAddr() net.Addr {
	if in.adminListener == nil {
		return nil
	}
	return in.adminListener.Addr()
}

// PeerAddr is the address of the listener that takes the cancels peers pass on, nil when
// peering is off.
func (in *Instance) PeerAddr() net.Addr {
	if in.peerListener == nil {
		return nil
	}
	return in.peerListener.Addr()
}

// Run starts the monitor, waits briefly for its first round, and serves
// clients on ln until ctx ends. It closes the pool and the function catalogue's
// manager when it returns.
func (in *Instance) Run(ctx context.Context, ln net.Listener) error {
	defer in.Pool.Close()
	defer in.closeCatalogues()
	// The monitor outlives ctx until the server has drained: statements of
	// the sessions that finish during a shutdown are routed as usual.
	in.monitorCtx = context.WithoutCancel(ctx)
	monitorCtx, stopMonitor := context.WithCancel(in.monitorCtx)
	in.reloading.Lock()
	in.stopMonitor = stopMonitor
	in.reloading.Unlock()
	defer func() {
		in.reloading.Lock()
		in.stopMonitor()
		in.reloading.Unlock()
	}()
	go in.Monitor.Run(monitorCtx)
	roleCtx, stopRoles := context.WithCancel(in.monitorCtx)
	defer stopRoles()
	go in.closeOnRoleChange(roleCtx)
	go in.retireOnStandbyReplay(roleCtx)
	// The admin side outlives ctx until the server has drained, so that
	// metrics and /readyz stay readable while sessions finish.
	adminCtx, stopAdmin := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAdmin()
	if in.Admin != nil {
		go in.Admin.Run(adminCtx)
	}
	if in.adminListener != nil {
		in.log.Info().Str("admin_listen", in.adminListener.Addr().String()).Msg("admin listener serving /metrics, /healthz, /readyz, /history and the status page")
		go func() {
			if err := in.Admin.Serve(adminCtx, in.adminListener); err != nil {
				in.log.Error().Err(err).Msg("admin listener stopped")
			}
		}()
	}
	if in.peerListener != nil {
		in.log.Info().Str("peering_listen", in.peerListener.Addr().String()).Int("instance", in.cfg.Peering.Instance).Int("peers", len(in.Server.peers)).Msg("peering listener taking the cancels other instances pass on")
		// The peering listener outlives ctx until the server has drained, as the client
		// listener's cancels do: a peer passes on cancels of the statements the drain waits for.
		peersCtx, stopPeers := context.WithCancel(context.WithoutCancel(ctx))
		defer stopPeers()
		go func() {
			if err := in.Server.ServePeers(peersCtx, in.peerListener); err != nil {
				in.log.Error().Err(err).Msg("peering listener stopped")
			}
		}()
	}
	readyCtx, readyCancel := context.WithTimeout(ctx, in.cfg.Monitor.DownAfter+in.cfg.Monitor.Interval)
	if err := in.Monitor.Ready(readyCtx); err != nil {
		in.log.Warn().Err(err).Msg("the node monitor has not finished its first round; serving anyway")
	}
	readyCancel()
	return in.Server.Serve(ctx, ln)
}

// closeOnRoleChange closes pooled connections to a node whose role changed:
// a connection made to a standby must not serve writes after a promotion by
// accident of reuse, and one made to a demoted primary is useless.
func (in *Instance) closeOnRoleChange(ctx context.Context) {
	roles := make(map[string]route.Role)
	for ctx.Err() == nil {
		in.nodes.WaitFor(ctx, func(s *route.Snapshot) bool {
			changed := false
			for _, n := range s.Nodes {
				if !n.Up {
					continue
				}
				if old, seen := roles[n.Name]; seen && old != n.Role {
					in.log.Warn().Str("node", n.Name).Str("was", old.String()).Str("now", n.Role.String()).Msg("node changed role: closing its pooled connections")
					in.Pool.CloseNode(n.Name)
					changed = true
				}
				roles[n.Name] = n.Role
			}
			return changed
		})
	}
}

// readUsersFile reads auth.users_file; a user also in the users list keeps that entry.
func readUsersFile(cfg config.Config, logger zerolog.Logger) ([]*auth.Credentials, error) {
	file, err := os.Open(cfg.Auth.UsersFile)
	if err != nil {
		return nil, fmt.Errorf("auth.users_file: %w", err)
	}
	defer file.Close()
	fileCreds, err := auth.ParseUserList(file, cfg.Auth.UsersFile)
	if err != nil {
		return nil, fmt.Errorf("auth.users_file: %w", err)
	}
	configured := make(map[string]bool, len(cfg.Users))
	for _, u := range cfg.Users {
		configured[u.Name] = true
	}
	var creds []*auth.Credentials
	for _, c := range fileCreds {
		if configured[c.User()] {
			logger.Warn().Str("user", c.User()).Msg("auth.users_file: the user is also in users; that entry is used")
			continue
		}
		creds = append(creds, c)
	}
	return creds, nil
}

// closeCatalogues stops the function catalogue's manager once the server has drained: its timers
// (a confirmation read, the settling of changes) and kept connections would outlive the proxy, and
// a read they start would fail against nodes being stopped with it.
func (in *Instance) closeCatalogues() {
	if m, ok := in.Server.opts.Classifier.Catalogues().(*catalog.Manager); ok {
		m.Close()
	}
}
