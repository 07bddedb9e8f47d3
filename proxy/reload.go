package proxy

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/pgowl/pgowl/admin"
	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/monitor"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/access"
	"github.com/pgowl/pgowl/proxy/auth"
)

// ReloadError says why a configuration was refused by a reload; the
// configuration in force is then unchanged.
type ReloadError struct {
	// Key is the configuration key at fault, "" when the reason is not one key.
	Key    string
	Reason string
}

func (e *ReloadError) Error() string {
	if e.Key == "" {
		return e.Reason
	}
	return e.Key + ": " + e.Reason
}

// restartOnlyKeys are the parts of the configuration a reload cannot change:
// they are read once, when sockets, the pool or the classifier are set up. A
// reload that changes one is refused whole.
var restartOnlyKeys = []struct {
	key string
	get func(config.Config) any
}{
	{"listen", func(c config.Config) any { return c.Listen }},
	{"admin.listen", func(c config.Config) any { return c.Admin.Listen }},
	{"admin.history_size", func(c config.Config) any { return c.Admin.HistorySize }},
	{"monitor", func(c config.Config) any { return c.Monitor }},
	{"pool.mode", func(c config.Config) any { return c.Pool.Mode }},
	{"pool.min_idle", func(c config.Config) any { return c.Pool.MinIdle }},
	{"pool.idle_timeout", func(c config.Config) any { return c.Pool.IdleTimeout }},
	{"pool.max_lifetime", func(c config.Config) any { return c.Pool.MaxLifetime }},
	{"pool.health_check_after", func(c config.Config) any { return c.Pool.HealthCheckAfter }},
	{"pool.acquire_timeout", func(c config.Config) any { return c.Pool.AcquireTimeout }},
	{"pool.dial_timeout", func(c config.Config) any { return c.Pool.DialTimeout }},
	{"tls.nodes", func(c config.Config) any { return c.TLS.Nodes }},
	{"tcp", func(c config.Config) any { return c.TCP }},
	{"classify", func(c config.Config) any { return c.Classify }},
	{"log.format", func(c config.Config) any { return c.Log.Format }},
	{"auth.query_enabled", func(c config.Config) any { return c.Auth.QueryEnabled }},
	{"limits.max_message_size", func(c config.Config) any { return c.Limits.MaxMessageSize }},
	{"listen_reuse_port", func(c config.Config) any { return c.ListenReusePort }},
	{"peering", func(c config.Config) any { return c.Peering }},
	{"topology", func(c config.Config) any { return c.Topology }},
	{"limits.max_logins_in_progress", func(c config.Config) any { return c.Limits.MaxLoginsInProgress }},
	{"limits.max_logins_in_progress_per_address", func(c config.Config) any { return c.Limits.MaxLoginsInProgressPerAddress }},
}

// SetConfigSource gives RELOAD (and Reload) the function that re-reads the
// configuration; applied, when set, runs after a configuration was put in
// force (the caller's own settings, such as the log level).
func (in *Instance) SetConfigSource(source func() (config.Config, error), applied func(config.Config)) {
	in.reloading.Lock()
	in.configSource, in.configApplied = source, applied
	in.reloading.Unlock()
}

// Reload re-reads the configuration from the source set by SetConfigSource
// and applies it (see Apply); the admin console's RELOAD runs it.
func (in *Instance) Reload() error {
	in.reloading.Lock()
	source := in.configSource
	in.reloading.Unlock()
	if source == nil {
		return &ReloadError{Reason: "this pgowl has no configuration file to re-read"}
	}
	cfg, err := source()
	if err != nil {
		in.log.Error().Err(err).Msg("reload refused: the configuration in force is unchanged")
		return err
	}
	return in.Apply(cfg)
}

// Apply puts cfg in force without dropping sessions, or refuses it whole
// and returns why. Sessions read the new users, passwords, routing policy,
// TLS certificates and access rules from their next unit (their next login
// for credentials). When nodes were added or removed, a monitor of the new
// list is started and swapped in once it has polled every node added or
// changed (it starts from the old monitor's last polls of the nodes kept,
// and polls them at once too); the other
// settings are in force meanwhile, with the old node list, and are taken
// back if that monitor fails its first round (the reload is then refused). A removed
// node gets no new units, its sessions finish their transaction there, and
// its pooled connections are closed as they are released (and no longer kept
// for pool.min_idle); a node added gets its pool.min_idle connections at once
// (settleNodePools). The new monitor
// inherits what the old one learned about the nodes kept unchanged (the
// highest timeline each was seen primary on, which keeps a stale primary
// refused; standbys found diverged) and forgets it for the nodes removed or
// re-added. Counters and the routing history are kept.
func (in *Instance) Apply(cfg config.Config) error {
	in.reloading.Lock()
	defer in.reloading.Unlock()
	err := in.apply(cfg)
	if err != nil {
		in.log.Error().Err(err).Msg("reload refused: the configuration in force is unchanged")
	}
	return err
}

func (in *Instance) apply(cfg config.Config) error {
	old := in.cfg
	for _, k := range restartOnlyKeys {
		if !reflect.DeepEqual(k.get(old), k.get(cfg)) {
			return &ReloadError{Key: k.key, Reason: "changed, but it takes effect only after a restart"}
		}
	}
	if in.Admin == nil && len(cfg.Admin.Users) > 0 {
		// The console (and the recorder behind it) is built at start only, when admin.listen or
		// admin.users is set: accepting the users here would let them be named admins of a
		// console that does not exist, and their logins to it reach the nodes as a database.
		return &ReloadError{Key: "admin.users", Reason: "the admin console starts only with pgowl (admin.listen or admin.users set at start): restart pgowl to add its first admin users"}
	}
	creds, err := buildCredentials(cfg, in.log)
	if err != nil {
		return &ReloadError{Reason: err.Error()}
	}
	tlsConfig, err := ClientTLSConfig(cfg.TLS)
	if err != nil {
		return &ReloadError{Key: "tls", Reason: err.Error()}
	}
	rules, err := access.Compile(cfg.Access.Rules)
	if err != nil {
		return &ReloadError{Key: "access.rules", Reason: err.Error()}
	}
	store := auth.NewStore(creds...)
	if in.authLookup != nil {
		store = store.WithLookup(in.authLookup)
	}
	var consoleAuth *auth.Store
	if in.Admin != nil {
		consoleAuth = consoleAuthStore(cfg, creds)
	}
	added, removed := nodeChanges(old, cfg)
	var firstRound time.Duration
	if len(added)+len(removed) > 0 || !reflect.DeepEqual(old.Nodes, cfg.Nodes) {
		// The settings that do not depend on the node list take effect at
		// once: the new monitor's first round can take a while under load,
		// and a new password or lag limit need not wait for it. Until the
		// swap, sessions keep the old node list, which the old monitor's
		// snapshots describe.
		inForce := in.Server.live()
		withOldNodes := cfg
		withOldNodes.Nodes = old.Nodes
		in.Server.settings.Store(newLiveSettings(withOldNodes, store, consoleAuth, tlsConfig, rules))
		started := time.Now()
		if err := in.swapMonitor(cfg); err != nil {
			in.Server.settings.Store(inForce)
			return err
		}
		firstRound = time.Since(started)
	}
	in.Pool.SetMaxPerNode(cfg.Pool.MaxPerNode)
	in.Server.settings.Store(newLiveSettings(cfg, store, consoleAuth, tlsConfig, rules))
	if in.Admin != nil {
		in.Admin.SetSettings(admin.Settings{Config: cfg, Policy: PolicyFromConfig(cfg)})
	}
	in.Pool.ForgetLogins(func(l pool.Login) bool { return loginStillConfigured(cfg, creds, l) })
	in.settleNodePools(cfg, added, removed)
	in.cfg = cfg
	if in.configApplied != nil {
		in.configApplied(cfg)
	}
	in.log.Info().Strs("nodes_added", added).Strs("nodes_removed", removed).Int("nodes", len(cfg.Nodes)).
		Int("users", len(cfg.Users)).Dur("monitor_first_round", firstRound).Str("changed", strings.Join(changedSections(old, cfg), ",")).Msg("configuration reloaded")
	return nil
}

// loginStillConfigured reports whether the pool's remembered login l still logs in as cfg (with
// creds, its users and users file) says: a user with a password still listed with that password;
// a user known by verifier (SCRAM passthrough) still with that verifier; a user without a secret
// still listed. A user in no list is kept while the auth query is on: it may have found the user,
// and it is not asked here (the node refuses a role that is gone).
func loginStillConfigured(cfg config.Config, creds []*auth.Credentials, l pool.Login) bool {
	if l.Password != "" {
		for _, u := range cfg.Users {
			if u.Name == l.User {
				return u.Password == l.Password
			}
		}
		return false
	}
	for _, c := range slices.Backward(creds) { // the last of a name is the one the store keeps
		if c.User() != l.User {
			continue
		}
		if l.SCRAM != nil {
			return c.FromVerifier() && c.ServerKey() == l.SCRAM.ServerKey
		}
		return true
	}
	return cfg.Auth.QueryEnabled
}

// settleNodePools brings the pool in line with cfg's node list, now in force: a node removed has
// its connections closed and its logins forgotten, so that pool.min_idle dials it no more; a node
// whose address changed has its connections closed and is dialled at the new address; and a node
// added or moved is given the logins remembered on every node, so that with pool.min_idle its
// first statements find idle connections rather than wait for a dial (as many logins per node as
// the pool remembers for any node).
func (in *Instance) settleNodePools(cfg config.Config, added, removed []string) {
	names := make([]string, 0, len(cfg.Nodes))
	for _, n := range cfg.Nodes {
		names = append(names, n.Name)
	}
	targets := in.Server.live().targets
	for _, name := range removed {
		if !slices.Contains(added, name) {
			in.Pool.ForgetNode(name)
		}
	}
	for _, name := range added {
		if slices.Contains(removed, name) {
			in.Pool.MoveNode(targets[name], names)
		} else {
			in.Pool.RememberLoginsOf(targets[name], names)
		}
	}
}

// swapMonitor starts a monitor of cfg's nodes, waits for its first round
// (bounded as at start-up), puts it in use and stops the old one.
func (in *Instance) swapMonitor(cfg config.Config) error {
	if in.monitorCtx == nil {
		return &ReloadError{Key: "nodes", Reason: "pgowl is not running yet"}
	}
	next := newMonitor(cfg, in.Pool, in.log)
	next.Inherit(keptNodesMemory(in.Monitor.Memory(), in.cfg, cfg))
	// The nodes kept unchanged start from the old monitor's last polls: the first round waits
	// only for the nodes added or changed (see monitor.InheritSamples).
	next.InheritSamples(in.Monitor, keptNodeNames(in.cfg, cfg))
	ctx, stop := context.WithCancel(in.monitorCtx)
	go next.Run(ctx)
	readyCtx, cancel := context.WithTimeout(ctx, cfg.Monitor.DownAfter+cfg.Monitor.Interval)
	defer cancel()
	if err := next.Ready(readyCtx); err != nil {
		stop()
		return &ReloadError{Key: "nodes", Reason: fmt.Sprintf("the monitor of the new node list did not finish its first round within %s", cfg.Monitor.DownAfter+cfg.Monitor.Interval)}
	}
	in.nodes.swap(next)
	in.stopMonitor()
	in.stopMonitor = stop
	in.Monitor = next
	return nil
}

// keptNodesMemory returns the part of memory (a monitor's facts per node,
// such as the highest timeline a node was seen primary on) that belongs to
// nodes cfg keeps with the same address: the facts of a removed node, or of
// one removed and added back under its name, are forgotten, and so is a
// standby's divergence from such a node (see monitor.NodeMemory).
func keptNodesMemory(memory map[string]monitor.NodeMemory, old, cfg config.Config) map[string]monitor.NodeMemory {
	added, removed := nodeChanges(old, cfg)
	changed := func(name string) bool { return slices.Contains(added, name) || slices.Contains(removed, name) }
	kept := make(map[string]monitor.NodeMemory, len(memory))
	for name, mem := range memory {
		if changed(name) {
			continue
		}
		if mem.DivergedFrom != "" && changed(mem.DivergedFrom) {
			mem.DivergedFrom, mem.DivergedTimeline = "", 0
		}
		if mem != (monitor.NodeMemory{}) {
			kept[name] = mem
		}
	}
	return kept
}

// keptNodeNames returns the names of the nodes cfg keeps from old with the same settings.
func keptNodeNames(old, cfg config.Config) []string {
	added, _ := nodeChanges(old, cfg)
	var kept []string
	for _, n := range cfg.Nodes {
		if !slices.Contains(added, n.Name) {
			kept = append(kept, n.Name)
		}
	}
	return kept
}

// nodeChanges returns the names of the nodes cfg adds and removes.
func nodeChanges(old, cfg config.Config) (added, removed []string) {
	names := func(c config.Config) map[string]config.Node {
		m := make(map[string]config.Node, len(c.Nodes))
		for _, n := range c.Nodes {
			m[n.Name] = n
		}
		return m
	}
	before, after := names(old), names(cfg)
	for name, n := range after {
		if was, ok := before[name]; !ok || was != n {
			added = append(added, name)
		}
	}
	for name, n := range before {
		if now, ok := after[name]; !ok || now != n {
			removed = append(removed, name)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// changedSections names the top-level sections that differ, for the log.
func changedSections(old, cfg config.Config) []string {
	var changed []string
	a, b := reflect.ValueOf(old), reflect.ValueOf(cfg)
	for i := range a.NumField() {
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			changed = append(changed, a.Type().Field(i).Tag.Get("mapstructure"))
		}
	}
	return changed
}

// Pause holds new units (admin console PAUSE); it waits up to shutdown_timeout for open transactions.
func (in *Instance) Pause() (stillOpen int, alreadyPaused bool) {
	return in.Server.Pause(in.Server.live().cfg.ShutdownTimeout)
}

// Resume releases the units held since Pause (admin console RESUME).
func (in *Instance) Resume() (held time.Duration, wasPaused bool) { return in.Server.Resume() }
