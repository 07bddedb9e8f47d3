package pool

// SetMaxPerNode changes the cap on connections per node (pool.max_per_node) of
// a running pool, for a configuration reload. A lower cap closes nothing: no
// connection is dialled while a node is at or above it, and the idle ones
// above it go as idle_timeout and max_lifetime close them. A higher cap gives
// its new slots at once to the Acquires queued for a node (each dials), then
// to the next ones: a pool raised because it is saturated serves its queue
// now, not one waiter per release. MinIdle is not changed.
func (p *Pool) SetMaxPerNode(n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opts.MaxPerNode = n
	if p.done {
		return
	}
	for _, np := range p.nodes {
		for np.open < n && len(np.waiters) > 0 {
			np.open++
			p.handOver(np, grant{})
		}
	}
}
