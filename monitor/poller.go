package monitor

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/nodetls"
	"github.com/pgowl/pgowl/route"
)

// pollSQL reads a node's role, timeline and WAL position in one round trip.
// pg_is_in_recovery() is evaluated once (a volatile function in a subquery
// is not pulled up), so the position matches the role reported with it.
//
// A primary's flush position comes too: no standby can replay WAL the
// primary has not flushed (with synchronous_commit = off a commit waits for
// the WAL writer), so a read that must see a write past it goes to the
// primary without asking a standby (read your writes).
//
// A primary's timeline is the one it inserts WAL on: the first 8 hex digits
// of the name of the WAL file its insert position is in. The last
// checkpoint's timeline would lag behind after a promotion until the next
// checkpoint ends, minutes later when it is spread, and in a split brain both
// primaries would report the same one meanwhile. A standby has no insert
// position; its last restartpoint's timeline is used.
//
// The node's load comes in the same round trip: the client backends running
// a statement and those waiting on a lock (the monitor's own excluded), and
// max_connections. Other users' sessions show their state only to a monitor
// user with pg_read_all_stats (pg_monitor) or superuser.
const pollSQL = `SELECT s.in_recovery,
  CASE WHEN s.in_recovery THEN c.timeline_id::bigint
    ELSE ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::bigint END,
  (CASE WHEN s.in_recovery THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text,
  a.active, a.lock_waiting, current_setting('max_connections')::int,
  (CASE WHEN s.in_recovery THEN NULL ELSE pg_current_wal_flush_lsn() END)::text
FROM (SELECT pg_is_in_recovery() AS in_recovery) AS s, pg_control_checkpoint() AS c,
  (SELECT count(*) FILTER (WHERE state = 'active') AS active,
     count(*) FILTER (WHERE wait_event_type = 'Lock') AS lock_waiting
   FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()) AS a`

// applicationName identifies the monitor's sessions in pg_stat_activity.
const applicationName = "pgowl-monitor"

// nodeSample is what one successful poll read.
type nodeSample struct {
	inRecovery bool
	timeline   uint32
	lsn        uint64
	lsnValid   bool
	// flush is a primary's flush position (0 for a standby).
	flush uint64
	// load is the node's load read with the sample.
	load route.NodeLoad
}

// pollResult is the outcome of one poll of one node.
type pollResult struct {
	index  int
	sample nodeSample
	sentAt time.Time
	doneAt time.Time
	err    error
}

// poller owns one node's connection and runs its polls one at a time.
type poller struct {
	index int
	// configure parses the node's connection settings, for each dial; addr is its host:port.
	configure    func() (*pgx.ConnConfig, error)
	addr         string
	dialTimeout  time.Duration
	queryTimeout time.Duration
	minBackoff   time.Duration
	maxBackoff   time.Duration
	// trigger asks for one poll; it holds at most one request.
	trigger chan struct{}
	// lost is Options.ConnectionLost for this node, or nil.
	lost func()

	conn        *pgx.Conn
	backoff     time.Duration
	nextDial    time.Time
	lastDialErr error
}

func newPoller(index int, node NodeAddr, opts Options) (*poller, error) {
	// Parsed again for each dial: pgconn reads tls.nodes' files when it parses, and a
	// certificate or CA renewed on disk must reach the monitor's next connection, as it reaches
	// the pools' (which parse at each dial). Parsed once now so that a bad setting fails New.
	configure := func() (*pgx.ConnConfig, error) {
		config, err := pgx.ParseConfig(connString(node, opts))
		if err != nil {
			return nil, err
		}
		config.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		config.StatementCacheCapacity = 0
		config.DescriptionCacheCapacity = 0
		config.ConnectTimeout = opts.DialTimeout
		config.DialFunc = opts.TCP.DialFunc(opts.DialTimeout)
		opts.TLS.Apply(&config.Config)
		return config, nil
	}
	if _, err := configure(); err != nil {
		return nil, fmt.Errorf("monitor: node %s: %w", node.Name, err)
	}
	var lost func()
	if opts.ConnectionLost != nil {
		lost = func() { opts.ConnectionLost(node.Name) }
	}
	return &poller{
		lost:         lost,
		index:        index,
		configure:    configure,
		addr:         net.JoinHostPort(node.Host, strconv.Itoa(node.Port)),
		dialTimeout:  opts.DialTimeout,
		queryTimeout: opts.QueryTimeout,
		minBackoff:   opts.Interval,
		maxBackoff:   opts.maxDialBackoff(),
		trigger:      make(chan struct{}, 1),
	}, nil
}

// connString renders a keyword/value connection string with quoted values.
func connString(node NodeAddr, opts Options) string {
	return opts.TLS.ConnString(
		nodetls.Param{Key: "host", Value: node.Host},
		nodetls.Param{Key: "port", Value: strconv.Itoa(node.Port)},
		nodetls.Param{Key: "user", Value: opts.User},
		nodetls.Param{Key: "password", Value: opts.Password},
		nodetls.Param{Key: "dbname", Value: opts.Database},
		nodetls.Param{Key: "application_name", Value: applicationName})
}

// run serves poll requests until ctx is done, then closes the connection.
// Results go to results, which must have room for one result per poller.
func (p *poller) run(ctx context.Context, results chan<- pollResult) {
	defer p.closeConn()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.trigger:
		}
		r := p.poll(ctx)
		r.index = p.index
		results <- r
	}
}

// poll connects if needed (respecting the backoff) and reads one sample.
func (p *poller) poll(ctx context.Context) pollResult {
	if p.conn == nil {
		if err := p.dial(ctx); err != nil {
			return pollResult{err: err}
		}
	}
	queryCtx, cancel := context.WithTimeout(ctx, p.queryTimeout)
	defer cancel()
	var (
		sample    nodeSample
		timeline  int64
		lsnText   *string
		flushText *string
	)
	sentAt := time.Now()
	var active, lockWaiting int64
	var maxConnections int32
	err := p.conn.QueryRow(queryCtx, pollSQL).Scan(&sample.inRecovery, &timeline, &lsnText, &active, &lockWaiting, &maxConnections, &flushText)
	doneAt := time.Now()
	if err != nil {
		p.closeConn()
		if p.lost != nil {
			p.lost()
		}
		return pollResult{err: fmt.Errorf("poll: %w", err)}
	}
	if timeline < 0 || timeline > int64(^uint32(0)) {
		return pollResult{err: fmt.Errorf("poll: timeline %d out of range", timeline)}
	}
	sample.timeline = uint32(timeline)
	sample.load = route.NodeLoad{Known: true, Active: int(active), LockWaiting: int(lockWaiting), MaxConnections: int(maxConnections)}
	if lsnText != nil {
		if sample.lsn, err = parseLSN(*lsnText); err != nil {
			return pollResult{err: err}
		}
		sample.lsnValid = true
	}
	if flushText != nil {
		if sample.flush, err = parseLSN(*flushText); err != nil {
			return pollResult{err: err}
		}
	}
	return pollResult{sample: sample, sentAt: sentAt, doneAt: doneAt}
}

// dial opens the connection unless the backoff after a failed dial has not
// yet passed, in which case it returns the last dial error.
func (p *poller) dial(ctx context.Context) error {
	now := time.Now()
	if now.Before(p.nextDial) {
		return fmt.Errorf("not connected (next attempt in %s): %w",
			p.nextDial.Sub(now).Round(time.Millisecond), p.lastDialErr)
	}
	dialCtx, cancel := context.WithTimeout(ctx, p.dialTimeout)
	defer cancel()
	config, err := p.configure()
	var conn *pgx.Conn
	if err == nil {
		conn, err = pgx.ConnectConfig(dialCtx, config)
	}
	if err != nil {
		p.backoff = min(max(2*p.backoff, p.minBackoff), p.maxBackoff)
		p.nextDial = time.Now().Add(p.backoff)
		p.lastDialErr = fmt.Errorf("connect to %s: %w", p.addr, err)
		return p.lastDialErr
	}
	p.conn = conn
	p.backoff = 0
	p.lastDialErr = nil
	return nil
}

func (p *poller) closeConn() {
	if p.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.queryTimeout)
	defer cancel()
	_ = p.conn.Close(ctx)
	p.conn = nil
}
