package proxy

import (
	"context"
	"strconv"
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
// auth.query_user, and remembers each answer, a missing user included, for auth.cache_ttl.
type authQuery struct {
	cfg   config.Config
	nodes NodeStates
	log   zerolog.Logger
	slots chan struct{}

	mu    sync.Mutex
	cache map[string]authQueryAnswer
}

// authQueryAnswer is one remembered answer of the auth query.
type authQueryAnswer struct {
	creds *auth.Credentials // nil: no such user, or no usable verifier
	at    time.Time
}

// newAuthQuery returns the lookup for cfg's auth query.
func newAuthQuery(cfg config.Config, nodes NodeStates, log zerolog.Logger) *authQuery {
	return &authQuery{cfg: cfg, nodes: nodes, log: log.With().Str("component", "auth_query").Logger(),
		slots: make(chan struct{}, authQueryConcurrency), cache: make(map[string]authQueryAnswer)}
}

// lookup returns user's credentials from the cache or the primary; it is auth.Store's lookup function.
func (q *authQuery) lookup(user string) (*auth.Credentials, bool) {
	q.mu.Lock()
	answer, cached := q.cache[user]
	q.mu.Unlock()
	if cached && time.Since(answer.at) < q.cfg.Auth.CacheTTL {
		return answer.creds, answer.creds != nil
	}
	timeout := q.cfg.Pool.DialTimeout + q.cfg.Monitor.QueryTimeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case q.slots <- struct{}{}:
	case <-ctx.Done():
		q.log.Warn().Msg("auth query: too many lookups in progress; the login fails")
		return nil, false
	}
	creds, err := q.query(ctx, user)
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
	q.cache[user] = authQueryAnswer{creds: creds, at: time.Now()}
	q.mu.Unlock()
	return creds, creds != nil
}

// query runs the auth query on the primary; nil credentials mean no user or no SCRAM verifier.
func (q *authQuery) query(ctx context.Context, user string) (*auth.Credentials, error) {
	snap := q.nodes.Snapshot()
	index, err := route.Primary(snap, PolicyFromConfig(q.cfg), time.Now())
	if err != nil {
		return nil, err
	}
	var host string
	var port int
	for _, n := range q.cfg.Nodes {
		if n.Name == snap.Nodes[index].Name {
			host, port = n.Host, n.Port
		}
	}
	connString := nodetls.FromConfig(q.cfg.TLS.Nodes).ConnString(
		nodetls.Param{Key: "host", Value: host}, nodetls.Param{Key: "port", Value: strconv.Itoa(port)},
		nodetls.Param{Key: "user", Value: q.cfg.Auth.QueryUser}, nodetls.Param{Key: "password", Value: q.cfg.Auth.QueryPassword},
		nodetls.Param{Key: "dbname", Value: q.cfg.Auth.QueryDatabase}, nodetls.Param{Key: "application_name", Value: "pgowl auth query"})
	connConfig, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	connConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	nodetls.FromConfig(q.cfg.TLS.Nodes).Apply(&connConfig.Config)
	conn, err := pgx.ConnectConfig(ctx, connConfig)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	var name, verifier *string
	err = conn.QueryRow(ctx, q.cfg.Auth.Query, user).Scan(&name, &verifier)
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
