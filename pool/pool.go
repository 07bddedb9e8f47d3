package pool

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Options configures a Pool.
type Options struct {
	MaxPerNode     int
	AcquireTimeout time.Duration
	DialTimeout    time.Duration
	IdleTimeout    time.Duration
	MaxLifetime    time.Duration
	MaxMessageSize int
}

// Pool keeps backend connections per node and per login.
type Pool struct {
	opts  Options
	mu    sync.Mutex
	nodes map[string]*nodePool
	done  bool
}

type nodePool struct {
	gen     uint64             // bumped by CloseNode: older connections are not reused
	open    int                // connections counted against the cap, idle or in use
	idle    map[string][]*Conn // by login key, most recently used last
	waiters []*waiter          // in arrival order
}

// waiter is an Acquire waiting for a node at its cap. A released connection
// of its login is handed to it directly; otherwise it is handed the released
// connection's slot and dials. Handing over, rather than waking it to race
// for what was freed, serves waiting clients in arrival order.
type waiter struct {
	key   string
	grant chan grant // buffered: the releaser never blocks
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
	return &Pool{opts: opts, nodes: make(map[string]*nodePool)}
}

func (p *Pool) node(name string) *nodePool {
	np := p.nodes[name]
	if np == nil {
		np = &nodePool{idle: make(map[string][]*Conn)}
		p.nodes[name] = np
	}
	return np
}

// Acquire returns a connection to t logged in as login. It fails with a
// *BusyError when the node's cap is reached for longer than the acquire
// timeout, or when the node itself refuses with too_many_connections; any
// other dial error (wrong password, missing database, node down) is returned
// as it is.
func (p *Pool) Acquire(ctx context.Context, t Target, login Login) (*Conn, error) {
	key := login.key()
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return nil, errors.New("pool is closed")
	}
	np := p.node(t.Node)
	if len(np.waiters) == 0 {
		if c := p.takeIdle(np, key); c != nil {
			p.mu.Unlock()
			return c, nil
		}
	}
	if len(np.waiters) == 0 && (np.open < p.opts.MaxPerNode || p.evictOtherLogin(np, key)) {
		np.open++
		p.mu.Unlock()
		return p.dialSlot(ctx, t, login)
	}
	w := &waiter{key: key, grant: make(chan grant, 1)}
	np.waiters = append(np.waiters, w)
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
	gen := p.node(t.Node).gen
	p.mu.Unlock()
	c, err := dial(ctx, t, login, p.opts.DialTimeout, p.opts.MaxMessageSize)
	if err != nil {
		p.forget(t.Node)
		if TooManyConnections(err) {
			return nil, &BusyError{Node: t.Node, Reason: "the node refused a new connection: " + PgError(err).Message}
		}
		return nil, err
	}
	c.pool = p
	c.gen = gen
	return c, nil
}

// takeIdle returns a usable idle connection for key, closing expired ones.
func (p *Pool) takeIdle(np *nodePool, key string) *Conn {
	list := np.idle[key]
	now := time.Now()
	for len(list) > 0 {
		c := list[len(list)-1]
		list = list[:len(list)-1]
		if p.expired(c, now) {
			np.open--
			go c.Close()
			continue
		}
		np.idle[key] = list
		c.lastUsed = now
		return c
	}
	delete(np.idle, key)
	return nil
}

func (p *Pool) expired(c *Conn, now time.Time) bool {
	return (p.opts.MaxLifetime > 0 && now.Sub(c.created) > p.opts.MaxLifetime) ||
		(p.opts.IdleTimeout > 0 && now.Sub(c.lastUsed) > p.opts.IdleTimeout)
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
	np := p.node(node)
	if len(np.waiters) > 0 {
		p.handOver(np, grant{}) // the slot passes to the first waiter
	} else {
		np.open--
	}
	p.mu.Unlock()
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
	p.mu.Lock()
	np := p.node(c.Node)
	if !reusable || p.done || c.TxStatus != 'I' || c.gen != np.gen || p.expired(c, time.Now()) {
		c.Close()
		if len(np.waiters) > 0 && !p.done {
			p.handOver(np, grant{})
		} else {
			np.open--
		}
		p.mu.Unlock()
		return
	}
	c.lastUsed = time.Now()
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
	np := p.node(node)
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
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
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

// Stats reports the connections to node that are in use and idle.
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
	return np.open - idle, idle
}

// Close closes every idle connection and refuses further acquires; in-use
// connections are closed when they are released.
func (p *Pool) Close() {
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
