package pool

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/pgowl/pgowl/nodetls"
	"github.com/pgowl/pgowl/tcpopt"
	"github.com/pgowl/pgowl/wire"
)

// Options configures a Pool.
type Options struct {
	MaxPerNode     int
	AcquireTimeout time.Duration
	DialTimeout    time.Duration
	// IdleTimeout closes connections idle for longer, but never the last
	// MinIdle of a remembered login; zero keeps them.
	IdleTimeout time.Duration
	// MaxLifetime closes idle connections older than this; zero means no limit.
	MaxLifetime time.Duration
	// MinIdle is the number of idle connections kept open to a node for each
	// login that acquired a connection there (at most maxRememberedLogins
	// logins per node).
	MinIdle int
	// HealthCheckAfter is how long a connection may sit idle before Acquire
	// checks it with an empty query; zero never checks.
	HealthCheckAfter time.Duration
	MaxMessageSize   int
	// TCP is the keepalive and user timeout of every connection to a node,
	// so that a session waiting for a node that vanished gets an error.
	TCP tcpopt.Options
	// TLS is how every connection to a node is secured (tls.nodes).
	TLS nodetls.Settings
}

// Pool keeps backend connections per node and per login.
type Pool struct {
	opts  Options
	mu    sync.Mutex
	nodes map[string]*nodePool
	done  bool

	// refillBackoff is how long background dials to a node pause after one failed.
	refillBackoff time.Duration
	// stopMaintenance ends the maintenance goroutine and its dials; nil when
	// no option needs one.
	stopMaintenance context.CancelFunc
	// maintenance counts the maintenance goroutine and its dials in flight.
	maintenance sync.WaitGroup
	// refillSoon asks the maintenance goroutine for a refill now rather than at its next round
	// (one pending request is enough); nil without a maintenance goroutine.
	refillSoon chan struct{}
	// retiredBefore holds, per database, when RetireDatabase last ran: a connection of that
	// database dialled before it is closed when released, not pooled.
	retiredBefore map[string]time.Time
}

type nodePool struct {
	gen     uint64             // bumped by CloseNode: older connections are not reused
	open    int                // connections counted against the cap, idle, in use or being dialled
	idle    map[string][]*Conn // by login key, most recently used last
	waiters []*waiter          // brief ones first (AcquireBriefly), each kind in arrival order
	waits   uint64             // acquires that had to wait, since the pool was made

	// For MinIdle: where the node was last reached, the logins that acquired
	// a connection there, and the background dials in flight by login key
	// (each holds a slot in open).
	target      Target
	logins      map[string]Login
	refilling   map[string]int
	refillAfter time.Time // no background dial before this, after one failed
	refillDials int       // background dials started, for tests
	// abandon ends the dials in flight to this node (AbandonDials); a
	// new one is made for later dials.
	abandon       context.Context
	abandonCancel context.CancelFunc
	// suspectSince: a connection of this node turned out dead at that time
	// (a restart or crash closes every connection at once), so connections
	// idle since before it are checked before they are handed out.
	suspectSince time.Time
	// retiredBefore holds, per database, the latest bound RetireDatabaseOn gave this node: a
	// connection of that database dialled before it is closed when released, not pooled.
	retiredBefore map[string]time.Time
}

// waiter is an Acquire waiting for a node at its cap. A released connection
// of its login is handed to it directly; otherwise it is handed the released
// connection's slot and dials. Handing over, rather than waking it to race
// for what was freed, serves waiting clients in arrival order (the brief
// ones first).
type waiter struct {
	key   string
	grant chan grant // buffered: the releaser never blocks
	// brief: the caller gives the connection back after one round trip
	// (AcquireBriefly); it waits ahead of the others.
	brief bool
}

type grant struct {
	conn *Conn // a connection of the waiter's login, or nil: a slot to dial with
}

// New returns an empty pool.
func New(opts Options) *Pool {
	if opts.MaxPerNode <= 0 {
		opts.MaxPerNode = 40
	}
	if opts.AcquireTimeout <= 0 {
		opts.AcquireTimeout = 2 * time.Second
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = 64 << 20
	}
	opts.MinIdle = min(max(opts.MinIdle, 0), opts.MaxPerNode)
	p := &Pool{opts: opts, nodes: make(map[string]*nodePool), refillBackoff: defaultRefillBackoff}
	if opts.MinIdle > 0 || opts.IdleTimeout > 0 || opts.MaxLifetime > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		p.stopMaintenance = cancel
		p.refillSoon = make(chan struct{}, 1)
		p.maintenance.Add(1)
		go p.maintain(ctx)
	}
	return p
}

func (p *Pool) node(name string) *nodePool {
	np := p.nodes[name]
	if np == nil {
		np = &nodePool{
			idle:      make(map[string][]*Conn),
			logins:    make(map[string]Login),
			refilling: make(map[string]int),
		}
		p.nodes[name] = np
	}
	return np
}

// Acquire returns a connection to t logged in as login. It fails with a
// *BusyError when the node's cap is reached for longer than the acquire
// timeout, or when the node itself refuses with too_many_connections; any
// other dial error (wrong password, missing database, node down) is returned
// as it is.
//
// An idle connection that sat idle for longer than HealthCheckAfter is
// checked first; a dead one is closed and the next one tried, or a new one
// dialled in its place.
func (p *Pool) Acquire(ctx context.Context, t Target, login Login) (*Conn, error) {
	return p.acquireRemembered(ctx, t, login, false)
}

// AcquireBriefly is Acquire for a caller that gives the connection back after one round trip
// (the proxy's batches that only prepare): when it has to wait, it waits ahead of every Acquire,
// in arrival order among the brief ones. A connection freed by a transaction then serves it
// first, and it holds the connection for less time than the transaction the others wait to run;
// otherwise a prepare waits behind transactions that may take the whole acquire_timeout.
func (p *Pool) AcquireBriefly(ctx context.Context, t Target, login Login) (*Conn, error) {
	return p.acquireRemembered(ctx, t, login, true)
}

func (p *Pool) acquireRemembered(ctx context.Context, t Target, login Login, brief bool) (*Conn, error) {
	key := login.key()
	c, err := p.acquire(ctx, t, login, key, brief)
	if err == nil && p.opts.MinIdle > 0 {
		p.remember(t, login, key, c.gen)
	}
	return c, err
}

// AcquireIdle returns an idle connection of login to t's node when one is free now, nil when
// none is: it waits for none and dials none for itself; only a dead idle connection it finds is
// replaced by a dial in its slot, as Acquire does. The proxy runs a statement on it beside a
// connection of the session still busy with pgowl's own read, where waiting for that connection
// costs less than a dial.
func (p *Pool) AcquireIdle(ctx context.Context, t Target, login Login) (*Conn, error) {
	return p.acquireWithoutWaiting(ctx, t, login, false)
}

// AcquireNow returns a connection of login to t when one is to be had without waiting: an idle
// one, or a dial while the node is under its cap (or has an idle connection of another login to
// close) and no Acquire waits; nil, nil when it would have to wait. The proxy prepares a write on
// the primary only so (route.SessionFacts.PrimaryFull).
func (p *Pool) AcquireNow(ctx context.Context, t Target, login Login) (*Conn, error) {
	c, err := p.acquireWithoutWaiting(ctx, t, login, true)
	if c != nil && err == nil && p.opts.MinIdle > 0 {
		p.remember(t, login, login.key(), c.gen)
	}
	return c, err
}

// acquireWithoutWaiting is AcquireIdle, and with dial AcquireNow.
func (p *Pool) acquireWithoutWaiting(ctx context.Context, t Target, login Login, dial bool) (*Conn, error) {
	key := login.key()
	p.mu.Lock()
	if p.done || len(p.node(t.Node).waiters) > 0 {
		p.mu.Unlock()
		return nil, nil
	}
	np := p.node(t.Node)
	if c, idleFor, suspect := p.takeIdle(np, key); c != nil {
		p.mu.Unlock()
		return p.handOutIdle(ctx, t, login, c, idleFor, suspect)
	}
	if !dial || !p.takeSlot(np, key) {
		p.mu.Unlock()
		return nil, nil
	}
	p.mu.Unlock()
	return p.dialSlot(ctx, t, login)
}

func (p *Pool) acquire(ctx context.Context, t Target, login Login, key string, brief bool) (*Conn, error) {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return nil, errors.New("pool is closed")
	}
	np := p.node(t.Node)
	if len(np.waiters) == 0 {
		if c, idleFor, suspect := p.takeIdle(np, key); c != nil {
			p.mu.Unlock()
			return p.handOutIdle(ctx, t, login, c, idleFor, suspect)
		}
	}
	if len(np.waiters) == 0 && p.takeSlot(np, key) {
		p.mu.Unlock()
		return p.dialSlot(ctx, t, login)
	}
	w := &waiter{key: key, grant: make(chan grant, 1), brief: brief}
	at := len(np.waiters)
	if brief {
		at = slices.IndexFunc(np.waiters, func(x *waiter) bool { return !x.brief })
		if at < 0 {
			at = len(np.waiters)
		}
	}
	np.waiters = slices.Insert(np.waiters, at, w)
	np.waits++
	p.mu.Unlock()

	timer := time.NewTimer(p.opts.AcquireTimeout)
	defer timer.Stop()
	select {
	case g := <-w.grant:
		return p.granted(ctx, t, login, g)
	case <-timer.C:
	case <-ctx.Done():
	}
	p.mu.Lock()
	before := len(np.waiters)
	np.waiters = slices.DeleteFunc(np.waiters, func(x *waiter) bool { return x == w })
	removed := len(np.waiters) < before
	p.mu.Unlock()
	if !removed {
		// A grant raced with the timeout: take it, it is ours.
		return p.granted(ctx, t, login, <-w.grant)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, &BusyError{Node: t.Node, Reason: "no backend connection became free within pool.acquire_timeout (" + p.opts.AcquireTimeout.String() + ")"}
}

// granted turns what a waiter was handed into a connection.
func (p *Pool) granted(ctx context.Context, t Target, login Login, g grant) (*Conn, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done {
		if g.conn != nil {
			g.conn.Close()
		}
		p.forget(t.Node)
		return nil, errors.New("pool is closed")
	}
	if g.conn != nil {
		g.conn.lastUsed = time.Now()
		return g.conn, nil
	}
	return p.dialSlot(ctx, t, login)
}

// dialSlot dials a connection for a slot already counted in open.
func (p *Pool) dialSlot(ctx context.Context, t Target, login Login) (*Conn, error) {
	p.mu.Lock()
	np := p.node(t.Node)
	gen := np.gen
	if np.abandon == nil {
		np.abandon, np.abandonCancel = context.WithCancel(context.Background())
	}
	abandon := np.abandon
	p.mu.Unlock()
	dctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(abandon, cancel)
	c, err := dial(dctx, t, login, &p.opts)
	stop()
	cancel()
	if err != nil {
		p.forget(t.Node)
		if abandon.Err() != nil && ctx.Err() == nil {
			return nil, &AbandonedError{Node: t.Node}
		}
		if TooManyConnections(err) {
			return nil, &BusyError{Node: t.Node, Reason: "the node refused a new connection: " + PgError(err).Message}
		}
		return nil, err
	}
	c.pool = p
	c.gen = gen
	return c, nil
}

// quietCheckAfter: a connection idle for longer is checked for anything the
// node sent while it was idle before it is handed out (one non-blocking
// peek, no round trip). Connections in steady use skip it.
const quietCheckAfter = time.Second

// handOutIdle returns c, just taken idle after idleFor, once it is known to
// be usable. A connection idle for longer than quietCheckAfter, or idle since
// before the node's connections became suspect, must have nothing to read:
// an idle connection has nothing to say, so bytes or an end of stream mean
// the node closed it (a FATAL, or the WARNING of a crash restart). One idle
// for longer than HealthCheckAfter also answers an empty query. A dead one is
// closed; its slot goes to the next idle connection of the login or, when
// there is none, to a new connection.
func (p *Pool) handOutIdle(ctx context.Context, t Target, login Login, c *Conn, idleFor time.Duration, suspect bool) (*Conn, error) {
	key := c.loginKey
	for {
		alive := true
		if suspect || idleFor > quietCheckAfter {
			alive = c.quiet()
		}
		if alive && p.opts.HealthCheckAfter > 0 && idleFor > p.opts.HealthCheckAfter {
			alive = p.checkAlive(c) == nil
		}
		if alive {
			return c, nil
		}
		c.Close()
		p.mu.Lock()
		np := p.node(t.Node)
		if p.done {
			p.freeSlot(np)
			p.mu.Unlock()
			return nil, errors.New("pool is closed")
		}
		var next *Conn
		if len(np.waiters) == 0 {
			next, idleFor, suspect = p.takeIdle(np, key)
		}
		if next == nil {
			p.mu.Unlock()
			return p.dialSlot(ctx, t, login) // in the dead connection's slot
		}
		p.freeSlot(np) // the next connection holds a slot of its own
		p.mu.Unlock()
		c = next
	}
}

// takeIdle returns an idle connection for key, how long it was idle and
// whether it is suspect (idle since before the node's suspectSince), closing
// those past MaxLifetime. Connections idle for longer than IdleTimeout are
// left to the maintenance goroutine, which keeps MinIdle of them. The caller
// holds p.mu.
func (p *Pool) takeIdle(np *nodePool, key string) (*Conn, time.Duration, bool) {
	list := np.idle[key]
	now := time.Now()
	for len(list) > 0 {
		c := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if p.tooOld(c, now) {
			p.freeSlot(np)
			go c.Close()
			continue
		}
		// An emptied list stays, with its array, for the connection's
		// release (maintenance drops lists that stay empty).
		np.idle[key] = list
		idleFor := now.Sub(c.lastUsed)
		suspect := c.lastUsed.Before(np.suspectSince)
		c.lastUsed = now
		return c, idleFor, suspect
	}
	if list != nil {
		np.idle[key] = list
	}
	return nil, 0, false
}

// AbandonDials ends the dials in flight to node, which fail with
// *AbandonedError: the node stopped answering (a host that still
// acknowledges TCP but runs nothing), and a dial would otherwise wait its
// whole DialTimeout. Later dials are not affected.
func (p *Pool) AbandonDials(node string) {
	p.mu.Lock()
	np := p.node(node)
	cancel := np.abandonCancel
	np.abandon, np.abandonCancel = nil, nil
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// AbandonedError reports a dial that AbandonDials ended: nothing was sent
// on the connection, so what it was for may go to another node.
type AbandonedError struct{ Node string }

func (e *AbandonedError) Error() string {
	return "the dial to " + e.Node + " was given up: the node does not answer"
}

// Suspect says that a connection to node turned out dead while idle: the
// node may have closed them all (a restart, a crash), so every connection
// idle since now is checked before it is handed out.
func (p *Pool) Suspect(node string) {
	now := time.Now()
	p.mu.Lock()
	p.node(node).suspectSince = now
	p.mu.Unlock()
}

// tooOld reports whether c has outlived MaxLifetime.
func (p *Pool) tooOld(c *Conn, now time.Time) bool {
	return p.opts.MaxLifetime > 0 && now.Sub(c.created) > p.opts.MaxLifetime
}

// retired reports whether c's login may have come before a retirement of its database
// (RetireDatabase on every node, RetireDatabaseOn on c's): its dial began no later than it. The
// caller holds p.mu.
func (p *Pool) retired(c *Conn) bool {
	if before, ok := p.retiredBefore[c.database]; ok && !c.dialStarted.After(before) {
		return true
	}
	if np := p.nodes[c.Node]; np != nil {
		if before, ok := np.retiredBefore[c.database]; ok && !c.dialStarted.After(before) {
			return true
		}
	}
	return false
}

// RetireDatabase ends the pooled life of every connection to database dialled until now, on every
// node: idle ones are closed at once, and those in use are closed when released rather than
// pooled (a session that holds one keeps it until then). The logins are kept, so MinIdle dials
// new ones. A proxy calls it when the defaults a login applies changed (ALTER ROLE or ALTER
// DATABASE ... SET): a connection keeps the settings of its login, and a new one gets the new
// defaults, as a new direct connection would.
func (p *Pool) RetireDatabase(database string) {
	p.retire("", database, time.Now())
}

// RetireDatabaseOn ends, as RetireDatabase does, the pooled life of the connections to database
// on node whose dial began no later than before. A proxy calls it when a standby has replayed a
// change of defaults that RetireDatabase met before the standby had: the connections it logged in
// meanwhile, MinIdle's among them, carry the old defaults.
func (p *Pool) RetireDatabaseOn(node, database string, before time.Time) {
	p.retire(node, database, before)
}

// retire records the retirement of database's connections dialled until before, on node (every
// node when node is ""), and closes the idle ones it ends.
func (p *Pool) retire(node, database string, before time.Time) {
	var closing []*Conn
	p.mu.Lock()
	if node == "" {
		if p.retiredBefore == nil {
			p.retiredBefore = make(map[string]time.Time)
		}
		if before.After(p.retiredBefore[database]) {
			p.retiredBefore[database] = before
		}
	} else {
		np := p.node(node)
		if np.retiredBefore == nil {
			np.retiredBefore = make(map[string]time.Time)
		}
		if before.After(np.retiredBefore[database]) {
			np.retiredBefore[database] = before
		}
	}
	for name, np := range p.nodes {
		if node != "" && name != node {
			continue
		}
		for key := range np.idle {
			closing = p.takeOutIdle(np, key, closing, func(c *Conn, _ int) bool { return p.retired(c) })
		}
	}
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
	p.kickRefill(p.refillSoon != nil && len(closing) > 0)
}

// takeOutIdle takes out of np's idle connections of login key, in order, those drop picks (told
// how many of the list are still left), frees their slots, and returns closing with them
// appended, to be closed once p.mu is let go. The caller holds p.mu.
func (p *Pool) takeOutIdle(np *nodePool, key string, closing []*Conn, drop func(c *Conn, left int) bool) []*Conn {
	list := np.idle[key]
	left := len(list)
	kept := list[:0]
	for _, c := range list {
		if drop(c, left) {
			closing = append(closing, c)
			left--
			p.freeSlot(np)
			continue
		}
		kept = append(kept, c)
	}
	clear(list[len(kept):])
	if len(kept) == 0 {
		delete(np.idle, key)
	} else {
		np.idle[key] = kept
	}
	return closing
}

// takeSlot takes a slot of np for a dial of login key, and reports whether there was one: a new
// one under the cap, or the slot of an idle connection of another login, which it closes (the
// slot passes to the caller as it is, counted once). The caller holds p.mu.
func (p *Pool) takeSlot(np *nodePool, key string) bool {
	if np.open < p.opts.MaxPerNode {
		np.open++
		return true
	}
	return p.evictOtherLogin(np, key)
}

// evictOtherLogin closes one idle connection of another login to make room.
func (p *Pool) evictOtherLogin(np *nodePool, key string) bool {
	for k, list := range np.idle {
		if k == key || len(list) == 0 {
			continue
		}
		c := list[0]
		np.idle[k] = list[1:]
		if len(np.idle[k]) == 0 {
			delete(np.idle, k)
		}
		go c.Close()
		return true // the slot passes to the caller
	}
	return false
}

// forget gives back a slot whose connection never came to be or was closed.
func (p *Pool) forget(node string) {
	p.mu.Lock()
	p.freeSlot(p.node(node))
	p.mu.Unlock()
}

// freeSlot gives back a slot whose connection is gone: it passes to the
// first waiter, if any. The caller holds p.mu.
func (p *Pool) freeSlot(np *nodePool) {
	if len(np.waiters) > 0 {
		p.handOver(np, grant{})
	} else {
		np.open--
	}
}

// handOver gives g to the first waiter. The caller holds p.mu.
func (p *Pool) handOver(np *nodePool, g grant) {
	w := np.waiters[0]
	np.waiters = np.waiters[1:]
	w.grant <- g
}

// Release returns c to the pool. A connection that is not reusable (broken,
// in an unknown protocol state, or its node changed role) is closed.
func (p *Pool) Release(c *Conn, reusable bool) {
	now := time.Now() // read before the lock: one clock read serves both checks
	p.mu.Lock()
	p.releaseLocked(c, reusable, now)
}

// releaseLocked is Release for a caller that holds p.mu, which it unlocks.
func (p *Pool) releaseLocked(c *Conn, reusable bool, now time.Time) {
	np := p.node(c.Node)
	if !reusable || p.done || c.TxStatus != wire.TxIdle || c.gen != np.gen || p.tooOld(c, now) || p.retired(c) {
		c.Close()
		if len(np.waiters) > 0 && !p.done {
			p.handOver(np, grant{})
		} else {
			np.open--
		}
		p.mu.Unlock()
		return
	}
	c.lastUsed = now
	if len(np.waiters) > 0 {
		for i, w := range np.waiters {
			if w.key == c.loginKey {
				np.waiters = slices.Delete(np.waiters, i, i+1)
				w.grant <- grant{conn: c}
				p.mu.Unlock()
				return
			}
		}
		// The first waiter needs another login: it gets this connection's slot.
		p.mu.Unlock()
		c.Close()
		p.mu.Lock()
		if len(np.waiters) > 0 {
			p.handOver(np, grant{})
		} else {
			np.open--
		}
		p.mu.Unlock()
		return
	}
	np.idle[c.loginKey] = append(np.idle[c.loginKey], c)
	p.mu.Unlock()
}

// CloseNode closes every idle connection to node, and every connection in
// use when it is released, for example after the node changed role.
func (p *Pool) CloseNode(node string) {
	p.mu.Lock()
	closing := p.closeNodeLocked(p.node(node))
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// closeNodeLocked is CloseNode for a caller that holds p.mu: it returns the
// idle connections, for the caller to close once it unlocked.
func (p *Pool) closeNodeLocked(np *nodePool) []*Conn {
	np.gen++
	var closing []*Conn
	for k, list := range np.idle {
		closing = append(closing, list...)
		np.open -= len(list)
		delete(np.idle, k)
	}
	for range closing {
		if len(np.waiters) == 0 {
			break
		}
		np.open++
		p.handOver(np, grant{})
	}
	return closing
}

// Saturated reports whether an Acquire for node would have to wait: the node
// is at its cap with no idle connection, or clients are already waiting.
func (p *Pool) Saturated(node string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	np := p.nodes[node]
	if np == nil {
		return false
	}
	if len(np.waiters) > 0 {
		return true
	}
	if np.open < p.opts.MaxPerNode {
		return false
	}
	for _, list := range np.idle {
		if len(list) > 0 {
			return false
		}
	}
	return true
}

// Stats reports the connections to node that are in use and idle. Background
// dials for MinIdle in flight count as neither.
func (p *Pool) Stats(node string) (inUse, idle int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	np := p.nodes[node]
	if np == nil {
		return 0, 0
	}
	for _, list := range np.idle {
		idle += len(list)
	}
	return np.open - idle - np.refillsInFlight(), idle
}

// NodeStats is a node's pool at one moment, for metrics and the admin console.
type NodeStats struct {
	// InUse and Idle are as Stats reports them.
	InUse, Idle int
	// Waiting is the number of acquires waiting for a connection now.
	Waiting int
	// Waits counts the acquires that had to wait since the pool was made.
	Waits uint64
}

// NodeStats reports node's connections in use and idle, its waiting acquires
// and how many acquires waited so far.
func (p *Pool) NodeStats(node string) NodeStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	np := p.nodes[node]
	if np == nil {
		return NodeStats{}
	}
	var st NodeStats
	for _, list := range np.idle {
		st.Idle += len(list)
	}
	st.InUse = np.open - st.Idle - np.refillsInFlight()
	st.Waiting, st.Waits = len(np.waiters), np.waits
	return st
}

// Close closes every idle connection, stops the maintenance goroutine and
// refuses further acquires; in-use connections are closed when they are
// released.
func (p *Pool) Close() {
	defer p.waitMaintenance()
	p.mu.Lock()
	p.done = true
	var closing []*Conn
	for _, np := range p.nodes {
		for k, list := range np.idle {
			closing = append(closing, list...)
			np.open -= len(list)
			delete(np.idle, k)
		}
		for _, w := range np.waiters {
			w.grant <- grant{} // it dials and fails: the pool is closed
		}
		np.waiters = nil
	}
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}
