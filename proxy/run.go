package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/monitor"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/auth"
	"github.com/pgowl/pgowl/route"
)

// Instance is a whole pgowl wired from a configuration: the node monitor,
// the backend pool, the classifier and the client-facing server.
type Instance struct {
	Server  *Server
	Monitor *monitor.Monitor
	Pool    *pool.Pool
	cfg     config.Config
	log     zerolog.Logger
}

// Build wires an Instance from cfg. Nothing runs until Run.
func Build(cfg config.Config, logger zerolog.Logger) (*Instance, error) {
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
	var tlsConfig *tls.Config
	if cfg.TLS.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	nodes := make([]monitor.NodeAddr, 0, len(cfg.Nodes))
	for _, n := range cfg.Nodes {
		nodes = append(nodes, monitor.NodeAddr{Name: n.Name, Host: n.Host, Port: n.Port})
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
	})
	mon := monitor.New(monitor.Options{
		Nodes:        nodes,
		User:         cfg.Monitor.User,
		Password:     cfg.Monitor.Password,
		Database:     cfg.Monitor.Database,
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
		Logger:         logger.With().Str("component", "monitor").Logger(),
	})
	srv, err := NewServer(Options{
		Config:     cfg,
		Logger:     logger,
		Nodes:      mon,
		Classifier: newClassifier(cfg, mon, logger),
		Pool:       backends,
		Auth:       auth.NewStore(creds...),
		TLS:        tlsConfig,
	})
	if err != nil {
		backends.Close() // stops its maintenance goroutine
		return nil, err
	}
	return &Instance{Server: srv, Monitor: mon, Pool: backends, cfg: cfg, log: logger}, nil
}

// Run starts the monitor, waits briefly for its first round, and serves
// clients on ln until ctx ends. It closes the pool when it returns.
func (in *Instance) Run(ctx context.Context, ln net.Listener) error {
	defer in.Pool.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go in.Monitor.Run(ctx)
	go in.closeOnRoleChange(ctx)
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
		in.Monitor.WaitFor(ctx, func(s *route.Snapshot) bool {
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
