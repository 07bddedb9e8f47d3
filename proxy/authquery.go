package proxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/nodetls"
	"github.com/pgowl/pgowl/proxy/auth"
	"github.com/pgowl/pgowl/route"
)

// authQueryConcurrency bounds the auth queries running at once, so that a flood of logins as
// unknown users cannot open more than a few connections to the primary.
const authQueryConcurrency = 4

// authQuery looks users' SCRAM verifiers up on the primary with auth.query, through the login
// auth.query_user, and remembers each answer, a missing user included, for auth.cache_ttl. It
// reads the configuration in force at each lookup (settings), so that a reload's auth.* settings
// apply to the next one, and reaches the primary at the address the monitor has for it (a
// reload's node list included).
type authQuery struct {
	settings func() config.Config
	nodes    NodeStates
	log      zerolog.Logger
	slots    chan struct{}

	mu    sync.Mutex
	cache map[string]authQueryAnswer
	// cachedFor is the auth section the cached answers were found with: answers found with
	// another query, login or database are dropped.
	cachedFor config.Auth
}

// authQueryAnswer is one remembered answer of the auth query.
type authQueryAnswer struct {
	creds *auth.Credentials // nil: no such user, or no usable verifier
	at    time.Time
}

// newAuthQuery returns the auth query; its settings must be set before its first lookup.
func newAuthQuery(nodes NodeStates, log zerolog.Logger) *authQuery {
	return &authQuery{nodes: nodes, log: log.With().Str("component", "auth_query").Logger(),
		slots: make(chan struct{}, authQueryConcurrency), cache: make(map[string]authQueryAnswer)}
}

// lookup returns user's credentials from the cache or the primary; it is auth.Store's lookup function.
func (q *authQuery) lookup(user string) (*auth.Credentials, bool) {
	cfg := q.settings()
	q.mu.Lock()
	if !sameAuthQuery(q.cachedFor, cfg.Auth) {
		clear(q.cache)
		q.cachedFor = cfg.Auth
	}
	answer, cached := q.cache[user]
	q.mu.Unlock()
	if cached && time.Since(answer.at) < cfg.Auth.CacheTTL {
		return answer.creds, answer.creds != nil
	}
	timeout := cfg.Pool.DialTimeout + cfg.Monitor.QueryTimeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case q.slots <- struct{}{}:
	case <-ctx.Done():
		q.log.Warn().Msg("auth query: too many lookups in progress; the login fails")
		return nil, false
	}
	creds, err := q.query(ctx, cfg, user)
	<-q.slots
	if err != nil {
		// Not remembered: the next login asks again.
		q.log.Warn().Err(err).Msg("auth query failed; the login fails")
		return nil, false
	}
	q.mu.Lock()
	if len(q.cache) > 100000 {
		clear(q.cache) // bounded: names are chosen by clients
	}
	if sameAuthQuery(q.cachedFor, cfg.Auth) { // else a reload changed the query meanwhile
		q.cache[user] = authQueryAnswer{creds: creds, at: time.Now()}
	}
	q.mu.Unlock()
	return creds, creds != nil
}

// sameAuthQuery reports whether answers found with auth settings a hold for b: the same query,
// run by the same login on the same database (cache_ttl may differ).
func sameAuthQuery(a, b config.Auth) bool {
	return a.Query == b.Query && a.QueryUser == b.QueryUser && a.QueryPassword == b.QueryPassword && a.QueryDatabase == b.QueryDatabase
}

// query runs cfg's auth query on the primary; nil credentials mean no user or no SCRAM verifier.
func (q *authQuery) query(ctx context.Context, cfg config.Config, user string) (*auth.Credentials, error) {
	snap := q.nodes.Snapshot()
	index, err := route.Primary(snap, PolicyFromConfig(cfg), time.Now())
	if err != nil {
		return nil, err
	}
	// The monitor's address of the node: a node a reload added, or moved, is where it says.
	host, port, err := net.SplitHostPort(snap.Nodes[index].Addr)
	if err != nil {
		return nil, fmt.Errorf("the primary's address %q: %w", snap.Nodes[index].Addr, err)
	}
	connString := nodetls.FromConfig(cfg.TLS.Nodes).ConnString(
		nodetls.Param{Key: "host", Value: host}, nodetls.Param{Key: "port", Value: port},
		nodetls.Param{Key: "user", Value: cfg.Auth.QueryUser}, nodetls.Param{Key: "password", Value: cfg.Auth.QueryPassword},
		nodetls.Param{Key: "dbname", Value: cfg.Auth.QueryDatabase}, nodetls.Param{Key: "application_name", Value: "pgowl auth query"})
	connConfig, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	connConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	connConfig.DialFunc = TCPOptions(cfg.TCP).DialFunc(cfg.Pool.DialTimeout)
	nodetls.FromConfig(cfg.TLS.Nodes).Apply(&connConfig.Config)
	conn, err := pgx.ConnectConfig(ctx, connConfig)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	var name, verifier *string
	err = conn.QueryRow(ctx, cfg.Auth.Query, user).Scan(&name, &verifier)
	if err == pgx.ErrNoRows || (err == nil && (name == nil || verifier == nil)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	creds, err := auth.NewVerifierCredentials(user, *verifier)
	if err != nil {
		q.log.Warn().Str("user", user).Msg("auth query: the user's secret is not a SCRAM-SHA-256 verifier; the login fails")
		return nil, nil
	}
	return creds, nil
}
