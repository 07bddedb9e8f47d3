package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate checks every value and returns nil or the problems found, each an *Error naming its key path.
// It reads the file system to check that TLS files exist.
func (c Config) Validate() error {
	var v validator
	v.listen("listen", c.Listen)
	v.nodes(c.Nodes)
	v.users(c.Users, c.Auth.UsersFile != "" || c.Auth.QueryEnabled)
	v.monitor(c.Monitor)
	v.routing(c.Routing)
	v.oneOf("log.level", c.Log.Level, LogDebug, LogInfo, LogWarn, LogError)
	v.oneOf("log.format", c.Log.Format, LogJSON, LogConsole)
	v.tls(c.TLS)
	v.nodeTLS("tls.nodes", c.TLS.Nodes)
	v.auth(c.Auth)
	v.access(c.Access, c.TLS)
	v.limits(c.Limits)
	v.positive("shutdown_timeout", c.ShutdownTimeout)
	v.pool(c.Pool)
	v.tcp(c.TCP)
	v.classify(c.Classify)
	v.admin(c.Admin, c.Users, c.Auth)
	v.peering(c.Peering)
	v.topology(c.Topology)
	v.guards(c.Guards, c.Routing.AICommentPrefix)
	return joinErrors(v.problems)
}

// validator collects the problems found by Validate.
type validator struct {
	problems []error
}

// fail records a problem with the value at key.
func (v *validator) fail(key, format string, args ...any) {
	v.problems = append(v.problems, problemf(key, format, args...))
}

// oneOf checks that value is one of the allowed choices.
func (v *validator) oneOf(key, value string, choices ...string) {
	if !slices.Contains(choices, value) {
		v.fail(key, "%q is not one of %s", value, strings.Join(choices, ", "))
	}
}

// intRange checks that value lies within low..high.
func (v *validator) intRange(key string, value, low, high int) {
	if value < low || value > high {
		v.fail(key, "%d is out of range %d..%d", value, low, high)
	}
}

// atLeast checks that value is at least low.
func (v *validator) atLeast(key string, value, low int) {
	if value < low {
		v.fail(key, "%d is less than %d", value, low)
	}
}

// positive checks that a duration is greater than zero.
func (v *validator) positive(key string, value time.Duration) {
	if value <= 0 {
		v.fail(key, "%s must be greater than 0", value)
	}
}

// notNegative checks that a duration is zero or more.
func (v *validator) notNegative(key string, value time.Duration) {
	if value < 0 {
		v.fail(key, "%s must not be negative", value)
	}
}

// notEmpty checks that a string is set.
func (v *validator) notEmpty(key, value string) {
	if strings.TrimSpace(value) == "" {
		v.fail(key, "must not be empty")
	}
}

// listen checks a host:port address with a numeric port; an empty host means every interface.
func (v *validator) listen(key, address string) {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		v.fail(key, "%q is not host:port", address)
		return
	}
	number, err := strconv.Atoi(port)
	if err != nil || number < 0 || number > 65535 {
		v.fail(key, "%q has port %q, which is not a number in 0..65535", address, port)
	}
}

// nodes checks the node list: at least one, unique well-formed names, a host and a valid port each.
func (v *validator) nodes(nodes []Node) {
	if len(nodes) == 0 {
		v.fail("nodes", "at least one node is required")
	}
	firstIndex := map[string]int{}
	for i, node := range nodes {
		prefix := fmt.Sprintf("nodes[%d]", i)
		switch {
		case node.Name == "":
			v.fail(prefix+".name", "must not be empty")
		case !isNodeName(node.Name):
			v.fail(prefix+".name", "%q may only contain letters, digits, _ and -", node.Name)
		default:
			if first, taken := firstIndex[node.Name]; taken {
				v.fail(prefix+".name", "%q is already the name of nodes[%d]", node.Name, first)
			} else {
				firstIndex[node.Name] = i
			}
		}
		v.notEmpty(prefix+".host", node.Host)
		if strings.Contains(node.Host, ",") {
			// libpq's list of hosts: pgowl watches and routes to each server as a node of its own.
			v.fail(prefix+".host", "%q lists several hosts; list each server as a node of its own", node.Host)
		}
		v.intRange(prefix+".port", node.Port, 1, 65535)
	}
}

// isNodeName reports whether name matches [a-zA-Z0-9_-]+.
func isNodeName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// users checks the user list: at least one unless users come from elsewhere, unique non-empty names,
// a known auth method and a password unless trusted.
func (v *validator) users(users []User, usersElsewhere bool) {
	if len(users) == 0 && !usersElsewhere {
		v.fail("users", "at least one user is required (or auth.users_file, or auth.query_enabled)")
	}
	firstIndex := map[string]int{}
	for i, user := range users {
		prefix := fmt.Sprintf("users[%d]", i)
		if user.Name == "" {
			v.fail(prefix+".name", "must not be empty")
		} else if first, taken := firstIndex[user.Name]; taken {
			v.fail(prefix+".name", "%q is already the name of users[%d]", user.Name, first)
		} else {
			firstIndex[user.Name] = i
		}
		v.oneOf(prefix+".auth", user.Auth, AuthSCRAM, AuthMD5, AuthTrust)
		if user.Password == "" && (user.Auth == AuthSCRAM || user.Auth == AuthMD5) {
			v.fail(prefix+".password", "must be set when auth is %s", user.Auth)
		}
	}
}

// monitor checks the monitor settings.
func (v *validator) monitor(m Monitor) {
	v.notEmpty("monitor.user", m.User)
	v.notEmpty("monitor.database", m.Database)
	v.positive("monitor.interval", m.Interval)
	if m.DownAfter < m.Interval {
		v.fail("monitor.down_after", "%s is less than monitor.interval (%s)", m.DownAfter, m.Interval)
	}
	v.positive("monitor.query_timeout", m.QueryTimeout)
}

// routing checks the routing settings.
func (v *validator) routing(r Routing) {
	v.positive("routing.max_replica_lag", r.MaxReplicaLag)
	v.oneOf("routing.standby_choice", r.StandbyChoice, StandbyLeastLag, StandbyRoundRobin, StandbyLeastConnections)
	v.oneOf("routing.when_no_standby", r.WhenNoStandby, WhenNoStandbyReject, WhenNoStandbyPrimary)
	v.notNegative("routing.primary_wait", r.PrimaryWait)
	v.oneOf("routing.read_your_writes", r.ReadYourWrites, ReadYourWritesOff, ReadYourWritesSession, ReadYourWritesUser)
	v.notNegative("routing.read_your_writes_wait", r.ReadYourWritesWait)
	v.oneOf("routing.read_your_writes_fallback", r.ReadYourWritesFallback, WhenNoStandbyPrimary, WhenNoStandbyReject)
}

// tls checks that both files or neither are set, that set files exist, and the client TLS settings.
func (v *validator) tls(t TLS) {
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		v.fail("tls.key_file", "must be set when tls.cert_file is set")
	case t.CertFile == "" && t.KeyFile != "":
		v.fail("tls.cert_file", "must be set when tls.key_file is set")
	}
	v.existingFile("tls.cert_file", t.CertFile)
	v.existingFile("tls.key_file", t.KeyFile)
	v.clientTLS(t)
}

// existingFile checks that path, when set, names an existing regular file.
func (v *validator) existingFile(key, path string) {
	if path == "" {
		return
	}
	info, err := os.Stat(path)
	switch {
	case err != nil:
		v.fail(key, "%q cannot be used: %v", path, err)
	case !info.Mode().IsRegular():
		v.fail(key, "%q is not a regular file", path)
	}
}

// limits checks the client limits; the largest message size is what the protocol's 32-bit length allows.
func (v *validator) limits(l Limits) {
	v.intRange("limits.max_message_size", l.MaxMessageSize, 1<<10, math.MaxInt32)
	v.positive("limits.startup_timeout", l.StartupTimeout)
	v.atLeast("limits.max_client_connections", l.MaxClientConnections, 1)
	v.atLeast("limits.max_logins_in_progress", l.MaxLoginsInProgress, 1)
	if l.MaxLoginsInProgress >= 1 {
		v.intRange("limits.max_logins_in_progress_per_address", l.MaxLoginsInProgressPerAddress, 1, l.MaxLoginsInProgress)
	}
	v.atLeast("limits.max_prepared_statements", l.MaxPreparedStatements, 1)
	v.intRange("limits.max_prepared_statement_bytes", l.MaxPreparedStatementBytes, 1<<10, math.MaxInt32)
	v.notNegative("limits.query_timeout", l.QueryTimeout)
	v.notNegative("limits.idle_transaction_timeout", l.IdleTransactionTimeout)
	v.notNegative("limits.first_reply_timeout", l.FirstReplyTimeout)
}

// pool checks the pool settings.
func (v *validator) pool(p Pool) {
	v.oneOf("pool.mode", p.Mode, PoolTransaction, PoolSession)
	v.atLeast("pool.max_per_node", p.MaxPerNode, 1)
	if p.MinIdle < 0 {
		v.fail("pool.min_idle", "%d is less than 0", p.MinIdle)
	} else if p.MinIdle > p.MaxPerNode && p.MaxPerNode >= 1 {
		v.fail("pool.min_idle", "%d is more than pool.max_per_node (%d)", p.MinIdle, p.MaxPerNode)
	}
	v.notNegative("pool.idle_timeout", p.IdleTimeout)
	v.notNegative("pool.max_lifetime", p.MaxLifetime)
	v.notNegative("pool.health_check_after", p.HealthCheckAfter)
	v.positive("pool.acquire_timeout", p.AcquireTimeout)
	v.positive("pool.dial_timeout", p.DialTimeout)
}

// tcp checks the keepalive settings (within Linux's limits) and the user timeout (in milliseconds, an int).
func (v *validator) tcp(t TCP) {
	v.notNegative("tcp.keepalive_idle", t.KeepaliveIdle)
	if t.KeepaliveIdle > 0 {
		if t.KeepaliveIdle > 32767*time.Second {
			v.fail("tcp.keepalive_idle", "%s is more than 32767s", t.KeepaliveIdle)
		}
		v.positive("tcp.keepalive_interval", t.KeepaliveInterval)
		if t.KeepaliveInterval > 32767*time.Second {
			v.fail("tcp.keepalive_interval", "%s is more than 32767s", t.KeepaliveInterval)
		}
		v.intRange("tcp.keepalive_count", t.KeepaliveCount, 1, 127)
	}
	v.notNegative("tcp.user_timeout", t.UserTimeout)
	if t.UserTimeout > math.MaxInt32*time.Millisecond {
		v.fail("tcp.user_timeout", "%s is too long", t.UserTimeout)
	}
}

// classify checks the classifier settings and function signatures; a function may not be both read-only and writing.
func (v *validator) classify(c Classify) {
	v.atLeast("classify.max_depth", c.MaxDepth, 1)
	v.positive("classify.refresh_interval", c.RefreshInterval)
	v.notNegative("classify.change_poll_interval", c.ChangePollInterval)
	v.atLeast("classify.cache_size", c.CacheSize, 0)
	readonly := map[string]int{}
	for i, signature := range c.Functions.Readonly {
		key := fmt.Sprintf("classify.functions.readonly[%d]", i)
		if err := checkFunctionSignature(signature); err != nil {
			v.fail(key, "%q %v", signature, err)
			continue
		}
		readonly[comparableSignature(signature)] = i
	}
	for i, signature := range c.Functions.Writes {
		key := fmt.Sprintf("classify.functions.writes[%d]", i)
		if err := checkFunctionSignature(signature); err != nil {
			v.fail(key, "%q %v", signature, err)
			continue
		}
		if other, both := readonly[comparableSignature(signature)]; both {
			v.fail(key, "%q is also listed in classify.functions.readonly[%d]", signature, other)
		}
	}
}

// comparableSignature reduces a signature to a form in which case and spaces do not matter.
func comparableSignature(signature string) string {
	return strings.ToLower(strings.Join(strings.Fields(signature), ""))
}

// checkFunctionSignature checks the form schema.name(argtypes) or name(argtypes): identifiers plain or
// double-quoted, then a parenthesised, comma-separated list of argument types that may be empty.
func checkFunctionSignature(signature string) error {
	rest := strings.TrimSpace(signature)
	for part := 0; ; part++ {
		var err error
		rest, err = skipIdentifier(rest)
		if err != nil {
			return err
		}
		rest = strings.TrimLeft(rest, " \t")
		if strings.HasPrefix(rest, ".") && part == 0 {
			rest = strings.TrimLeft(rest[1:], " \t")
			continue
		}
		break
	}
	if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
		return fmt.Errorf("is not of the form schema.name(argtypes) or name(argtypes)")
	}
	arguments := rest[1 : len(rest)-1]
	if strings.TrimSpace(arguments) == "" {
		return nil
	}
	depth, start := 0, 0
	for i := 0; i <= len(arguments); i++ {
		if i < len(arguments) {
			switch arguments[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				if depth < 0 {
					return fmt.Errorf("has unbalanced parentheses")
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if strings.TrimSpace(arguments[start:i]) == "" {
			return fmt.Errorf("has an empty argument type")
		}
		start = i + 1
	}
	if depth != 0 {
		return fmt.Errorf("has unbalanced parentheses")
	}
	return nil
}

// skipIdentifier removes one plain or double-quoted SQL identifier from the start of text.
func skipIdentifier(text string) (string, error) {
	if strings.HasPrefix(text, `"`) {
		for i := 1; i < len(text); i++ {
			if text[i] != '"' {
				continue
			}
			if i+1 < len(text) && text[i+1] == '"' {
				i++
				continue
			}
			if i == 1 {
				return "", fmt.Errorf("has an empty quoted name")
			}
			return text[i+1:], nil
		}
		return "", fmt.Errorf("has an unterminated quoted name")
	}
	end := 0
	for end < len(text) {
		c := text[end]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
		digit := c >= '0' && c <= '9' || c == '$'
		if !letter && !(digit && end > 0) {
			break
		}
		end++
	}
	if end == 0 {
		return "", fmt.Errorf("is not of the form schema.name(argtypes) or name(argtypes)")
	}
	return text[end:], nil
}

// admin checks the admin listener, the history size and that every admin user is a configured user
// (when users come only from the users list: a users file or the auth query may name others).
func (v *validator) admin(a Admin, users []User, auth Auth) {
	if a.Listen != "" {
		v.listen("admin.listen", a.Listen)
	}
	v.atLeast("admin.history_size", a.HistorySize, 0)
	if auth.UsersFile != "" || auth.QueryEnabled {
		return
	}
	for i, name := range a.Users {
		key := fmt.Sprintf("admin.users[%d]", i)
		if !slices.ContainsFunc(users, func(u User) bool { return u.Name == name }) {
			v.fail(key, "%q is not one of the configured users", name)
		}
	}
}

// peering checks the instance number, the peering listener and the peer list: the
// numbers in range and unique, each peer with an address.
func (v *validator) peering(p Peering) {
	if p.Self != "" {
		i := slices.IndexFunc(p.Peers, func(peer Peer) bool { return peer.Address == p.Self })
		switch {
		case i < 0:
			v.fail("peering.self", "%q is not the address of any entry of peering.peers", p.Self)
		case p.Instance != p.Peers[i].Instance:
			v.fail("peering.self", "%q is the address of instance %d in peering.peers, but peering.instance is %d", p.Self, p.Peers[i].Instance, p.Instance)
		}
	}
	if p.Instance == 0 {
		if len(p.Peers) > 0 {
			v.fail("peering.instance", "must be set (1..%d) when peering.peers lists peers", MaxPeerInstance)
		}
		return
	}
	v.intRange("peering.instance", p.Instance, 1, MaxPeerInstance)
	v.nodeTLS("peering.tls", NodeTLS(p.TLS))
	if p.Listen == "" {
		v.fail("peering.listen", "must be set when peering.instance is: it is where peers pass cancels on to")
	} else {
		v.listen("peering.listen", p.Listen)
	}
	seen := map[int]int{}
	for i, peer := range p.Peers {
		prefix := fmt.Sprintf("peering.peers[%d]", i)
		v.intRange(prefix+".instance", peer.Instance, 1, MaxPeerInstance)
		if first, taken := seen[peer.Instance]; taken {
			v.fail(prefix+".instance", "%d is already the instance of peering.peers[%d]", peer.Instance, first)
		} else {
			seen[peer.Instance] = i
		}
		if peer.Instance != p.Instance {
			v.listen(prefix+".address", peer.Address)
		}
	}
}

// topology checks that every Patroni URL is an absolute http or https URL, and the REST API's
// TLS files: both of the client certificate's or neither, each set file existing.
func (v *validator) topology(t Topology) {
	for i, raw := range t.Patroni.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.fail(fmt.Sprintf("topology.patroni.urls[%d]", i), "%q is not an http:// or https:// URL", raw)
		}
	}
	p := t.Patroni
	switch {
	case p.CertFile != "" && p.KeyFile == "":
		v.fail("topology.patroni.key_file", "must be set when topology.patroni.cert_file is set")
	case p.CertFile == "" && p.KeyFile != "":
		v.fail("topology.patroni.cert_file", "must be set when topology.patroni.key_file is set")
	}
	v.existingFile("topology.patroni.ca_file", p.CAFile)
	v.existingFile("topology.patroni.cert_file", p.CertFile)
	v.existingFile("topology.patroni.key_file", p.KeyFile)
}
