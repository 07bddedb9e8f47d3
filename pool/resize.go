package pool

// SetMaxPerNode changes the cap on connections per node (pool.max_per_node) of
// a running pool, for a configuration reload. A lower cap closes nothing: no
// connection is dialled while a node is at or above it, and the idle ones
// above it go as idle_timeout and max_lifetime close them. A higher cap serves
// the next Acquire; waiters already queued are served as connections are
// released. MinIdle is not changed.
func (p *Pool) SetMaxPerNode(n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opts.MaxPerNode = n
}
