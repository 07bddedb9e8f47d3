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
	open    int                // connections counted against the cap, idle or in use
	idle    map[string][]*Conn // by login key, most recently used last
	waiters []chan struct{}    // in arrival order
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
	deadline := time.Now().Add(p.opts.AcquireTimeout)
	for {
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			return nil, errors.New("pool is closed")
		}
		np := p.node(t.Node)
		if c := p.takeIdle(np, key); c != nil {
			p.mu.Unlock()
			return c, nil
		}
		if np.open < p.opts.MaxPerNode || p.evictOtherLogin(np, key) {
			np.open++
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
			return c, nil
		}
		wake := make(chan struct{})
		np.waiters = append(np.waiters, wake)
		p.mu.Unlock()

		wait := time.Until(deadline)
		timer := time.NewTimer(wait)
		select {
		case <-wake:
			timer.Stop()
			continue
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
		p.mu.Lock()
		np.waiters = slices.DeleteFunc(np.waiters, func(w chan struct{}) bool { return w == wake })
		p.mu.Unlock()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &BusyError{Node: t.Node, Reason: "no backend connection became free within pool.acquire_timeout (" + p.opts.AcquireTimeout.String() + ")"}
	}
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
	np.open--
	p.wakeOne(np)
	p.mu.Unlock()
}

func (p *Pool) wakeOne(np *nodePool) {
	if len(np.waiters) > 0 {
		close(np.waiters[0])
		np.waiters = np.waiters[1:]
	}
}

// Release returns c to the pool. A connection that is not reusable (broken,
// in an unknown protocol state, or its node changed role) is closed.
func (p *Pool) Release(c *Conn, reusable bool) {
	p.mu.Lock()
	np := p.node(c.Node)
	if !reusable || p.done || c.TxStatus != 'I' || p.expired(c, time.Now()) {
		np.open--
		p.wakeOne(np)
		p.mu.Unlock()
		c.Close()
		return
	}
	c.lastUsed = time.Now()
	np.idle[c.loginKey] = append(np.idle[c.loginKey], c)
	p.wakeOne(np)
	p.mu.Unlock()
}

// CloseNode closes every idle connection to node, for example after it changed role.
func (p *Pool) CloseNode(node string) {
	p.mu.Lock()
	np := p.node(node)
	var closing []*Conn
	for k, list := range np.idle {
		closing = append(closing, list...)
		np.open -= len(list)
		delete(np.idle, k)
	}
	for range closing {
		p.wakeOne(np)
	}
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
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
			close(w)
		}
		np.waiters = nil
	}
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}
