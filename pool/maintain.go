package pool

import (
	"context"
	"maps"
	"strings"
	"time"
)

const (
	// maintenanceInterval is the time between two rounds of the maintenance goroutine.
	maintenanceInterval = 500 * time.Millisecond
	// maxRememberedLogins bounds the logins per node that MinIdle connections
	// are kept for; logins beyond it get none.
	maxRememberedLogins = 64
	// maxRefillsPerNode bounds the background dials in flight to one node.
	maxRefillsPerNode = 4
	// defaultRefillBackoff is how long background dials to a node pause after
	// one failed, so that a node that is down is not hammered.
	defaultRefillBackoff = 5 * time.Second
)

// remember records that login acquired a connection to t, so that the
// maintenance goroutine keeps MinIdle idle connections for it. gen is the
// acquired connection's: an Acquire that began before the node was closed,
// forgotten or moved (a reload) must not bring back its login or old address.
func (p *Pool) remember(t Target, login Login, key string, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	np := p.node(t.Node)
	if gen != np.gen {
		return
	}
	np.target = t
	if _, known := np.logins[key]; known || len(np.logins) >= maxRememberedLogins {
		return
	}
	login.Params = maps.Clone(login.Params) // the caller's map may change
	np.logins[key] = login
}

// RememberLoginsOf makes the logins remembered on the nodes named in from remembered on t's
// node too (up to maxRememberedLogins), when MinIdle is set; the maintenance goroutine then dials
// their MinIdle idle connections there at once, rather than when a session first needs one. A
// reload calls it for the nodes it adds, so that their first statements do not wait for a dial.
func (p *Pool) RememberLoginsOf(t Target, from []string) {
	p.mu.Lock()
	kick := p.rememberLoginsOfLocked(t, from)
	p.mu.Unlock()
	p.kickRefill(kick)
}

// MoveNode is for a node whose address a reload changed to t's: its connections are closed, idle
// ones now and those in use when released, as CloseNode does; background dials go to t from now
// on; and, as RememberLoginsOf does, the logins remembered on the nodes in from (its own
// included) get their MinIdle connections at t at once. All of it happens under one lock, so that
// no background dial to the old address counts as one of the new.
func (p *Pool) MoveNode(t Target, from []string) {
	p.mu.Lock()
	closing := p.closeNodeLocked(p.node(t.Node))
	kick := p.rememberLoginsOfLocked(t, from)
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
	p.kickRefill(kick)
}

// rememberLoginsOfLocked is RememberLoginsOf for a caller that holds p.mu; it reports whether the
// maintenance goroutine should refill at once.
func (p *Pool) rememberLoginsOfLocked(t Target, from []string) bool {
	if p.opts.MinIdle <= 0 || p.done {
		return false
	}
	np := p.node(t.Node)
	np.target = t
	np.refillAfter = time.Time{} // a backoff after a failed dial elsewhere does not hold here
	for _, name := range from {
		other := p.nodes[name]
		if other == nil || other == np {
			continue
		}
		for key, login := range other.logins {
			if _, known := np.logins[key]; !known && len(np.logins) < maxRememberedLogins {
				np.logins[key] = login // remembered logins are not changed once stored
			}
		}
	}
	return true
}

// kickRefill asks the maintenance goroutine for a refill now, when kick is set.
func (p *Pool) kickRefill(kick bool) {
	if !kick {
		return
	}
	select {
	case p.refillSoon <- struct{}{}:
	default: // one request is pending already
	}
}

// ForgetLogins forgets, on every node, the remembered logins keep rejects, and closes their idle
// connections now: a reload calls it for the logins whose user it removed or whose secret it
// changed, so that MinIdle no longer keeps (and re-dials, and copies to added nodes) connections
// as a user that cannot log in any more, or with a password the node no longer takes. Their
// connections in use go back to the pool when released and close at IdleTimeout.
func (p *Pool) ForgetLogins(keep func(Login) bool) {
	var closing []*Conn
	p.mu.Lock()
	for _, np := range p.nodes {
		for key, login := range np.logins {
			if keep(login) {
				continue
			}
			delete(np.logins, key)
			for _, c := range np.idle[key] {
				closing = append(closing, c)
				p.freeSlot(np)
			}
			delete(np.idle, key)
		}
	}
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// ForgetNode closes node's connections as CloseNode does and forgets its remembered logins, so
// that no background dial goes to it any more: for a node that a reload removed.
func (p *Pool) ForgetNode(node string) {
	p.mu.Lock()
	np := p.node(node)
	clear(np.logins)
	closing := p.closeNodeLocked(np)
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// maintain runs until ctx ends: every maintenanceInterval it closes idle
// connections that are past IdleTimeout or MaxLifetime and dials what the
// remembered logins miss of MinIdle.
func (p *Pool) maintain(ctx context.Context) {
	defer p.maintenance.Done()
	ticker := time.NewTicker(maintenanceInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			p.reapIdle(now)
			p.refill(ctx, now)
		case <-p.refillSoon:
			p.refill(ctx, time.Now())
		}
	}
}

// waitMaintenance stops the maintenance goroutine and waits for it and its dials.
func (p *Pool) waitMaintenance() {
	if p.stopMaintenance == nil {
		return
	}
	p.stopMaintenance()
	p.maintenance.Wait()
}

// reapIdle closes the idle connections older than MaxLifetime, and those idle
// for longer than IdleTimeout except the last MinIdle of a remembered login.
// The most recently used connections are the ones kept.
func (p *Pool) reapIdle(now time.Time) {
	if p.opts.IdleTimeout <= 0 && p.opts.MaxLifetime <= 0 {
		return
	}
	var closing []*Conn
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	for _, np := range p.nodes {
		for key := range np.idle {
			keep := 0
			if _, remembered := np.logins[key]; remembered {
				keep = p.opts.MinIdle
			}
			// Least recently used first.
			closing = p.takeOutIdle(np, key, closing, func(c *Conn, left int) bool {
				idleTooLong := p.opts.IdleTimeout > 0 && now.Sub(c.lastUsed) > p.opts.IdleTimeout && left > keep
				return p.tooOld(c, now) || idleTooLong
			})
		}
	}
	p.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// refillDial is a background dial for MinIdle, whose slot is already counted in open.
type refillDial struct {
	np     *nodePool
	target Target
	login  Login
	key    string
	gen    uint64
}

// refill starts the background dials that bring every remembered login to
// MinIdle idle connections, on nodes under their cap that nobody waits for
// and that are not backing off after a failed dial.
func (p *Pool) refill(ctx context.Context, now time.Time) {
	if p.opts.MinIdle <= 0 {
		return
	}
	var dials []refillDial
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	for _, np := range p.nodes {
		if len(np.logins) == 0 || len(np.waiters) > 0 || now.Before(np.refillAfter) {
			continue
		}
		inFlight := np.refillsInFlight()
		for key, login := range np.logins {
			missing := p.opts.MinIdle - len(np.idle[key]) - np.refilling[key]
			for ; missing > 0 && inFlight < maxRefillsPerNode && np.open < p.opts.MaxPerNode; missing-- {
				np.open++
				np.refilling[key]++
				np.refillDials++
				inFlight++
				dials = append(dials, refillDial{np: np, target: np.target, login: login, key: key, gen: np.gen})
			}
		}
	}
	p.maintenance.Add(len(dials)) // while the maintenance goroutine itself is counted
	p.mu.Unlock()
	for _, d := range dials {
		go p.refillOne(ctx, d)
	}
}

// refillOne dials one connection for MinIdle and puts it in the pool as
// idle, or hands it to a waiter. After a failure the node is left alone for
// refillBackoff; a login the node refuses is forgotten instead.
func (p *Pool) refillOne(ctx context.Context, d refillDial) {
	defer p.maintenance.Done()
	c, err := dial(ctx, d.target, d.login, &p.opts)
	if err != nil {
		p.mu.Lock()
		p.refillDone(d)
		if loginRefused(err) {
			delete(d.np.logins, d.key)
		} else {
			d.np.refillAfter = time.Now().Add(p.refillBackoff)
		}
		p.freeSlot(d.np)
		p.mu.Unlock()
		return
	}
	c.pool = p
	c.gen = d.gen // a CloseNode since the dial began makes the release close it
	p.mu.Lock()
	p.refillDone(d)
	p.releaseLocked(c, true, time.Now())
}

// refillDone ends the count of d as in flight. The caller holds p.mu.
func (p *Pool) refillDone(d refillDial) {
	if d.np.refilling[d.key]--; d.np.refilling[d.key] <= 0 {
		delete(d.np.refilling, d.key)
	}
}

// refillsInFlight returns the number of background dials to the node in flight.
func (np *nodePool) refillsInFlight() int {
	n := 0
	for _, count := range np.refilling {
		n += count
	}
	return n
}

// loginRefused reports whether the node refused the login itself (bad
// credentials, no such role or database) rather than being unavailable.
func loginRefused(err error) bool {
	pgErr := PgError(err)
	return pgErr != nil && (strings.HasPrefix(pgErr.Code, "28") || strings.HasPrefix(pgErr.Code, "3D"))
}
