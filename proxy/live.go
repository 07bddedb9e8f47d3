package proxy

import (
	"crypto/tls"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/access"
	"github.com/pgowl/pgowl/proxy/auth"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/tcpopt"
)

// liveSettings is the part of the configuration a reload replaces. A value is
// never modified after it is published: a reload builds a new one and swaps
// the Server's pointer, so that a session reads either the old settings or the
// new ones, never a mix of a half-applied change.
type liveSettings struct {
	cfg     config.Config
	policy  route.Policy
	targets map[string]pool.Target
	auth    *auth.Store
	// consoleAuth holds the admin users' credentials, for the admin console; nil without a console.
	consoleAuth *auth.Store
	// tls, when set, lets clients upgrade with SSLRequest.
	tls *tls.Config
	// channelBinding is the tls-server-end-point data of the certificate in tls, nil without
	// one: SCRAM-SHA-256-PLUS is offered on TLS connections when it is set.
	channelBinding []byte
	// access decides who may log in from where, and how; nil admits every user with its own method.
	access *access.Rules
	// admins may run the pgowl admin commands; nil lets every user run them.
	admins map[string]bool
	// clientTCP is set on every client connection (the tcp section).
	clientTCP tcpopt.Options
}

// newLiveSettings builds the settings of cfg with the credentials, TLS and access rules already built from it.
func newLiveSettings(cfg config.Config, store, consoleAuth *auth.Store, tlsConfig *tls.Config, rules *access.Rules) *liveSettings {
	live := &liveSettings{
		cfg:            cfg,
		policy:         PolicyFromConfig(cfg),
		targets:        make(map[string]pool.Target, len(cfg.Nodes)),
		auth:           store,
		consoleAuth:    consoleAuth,
		tls:            tlsConfig,
		channelBinding: tlsServerEndPoint(tlsConfig),
		access:         rules,
		clientTCP:      TCPOptions(cfg.TCP),
	}
	if len(cfg.Admin.Users) > 0 {
		live.admins = make(map[string]bool, len(cfg.Admin.Users))
		for _, user := range cfg.Admin.Users {
			live.admins[user] = true
		}
	}
	for _, n := range cfg.Nodes {
		live.targets[n.Name] = pool.Target{Node: n.Name, Host: n.Host, Port: n.Port}
	}
	return live
}

// live returns the settings in force now. A caller that needs several of
// them for one decision reads the pointer once.
func (s *Server) live() *liveSettings { return s.settings.Load() }
