package pool

import "context"

// Warm dials, in the background, one connection to t for each of logins (at
// most maxRefillsPerNode of them, in the order given, and only while the node
// is under MaxPerNode) that has no idle connection there, and keeps it idle
// for the next Acquire of that login. A node that a reload just added then
// serves its first statements without each waiting for a login, which under
// load takes hundreds of milliseconds. A dial that fails is dropped as a
// MinIdle refill's is: the node is left alone for a while, and a login it
// refuses is not tried again. Warm returns at once.
func (p *Pool) Warm(t Target, logins []Login) {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	np := p.node(t.Node)
	np.target = t
	var dials []refillDial
	for _, login := range logins {
		if len(dials) >= maxRefillsPerNode || np.open >= p.opts.MaxPerNode {
			break
		}
		key := login.key()
		if len(np.idle[key]) > 0 || np.refilling[key] > 0 {
			continue
		}
		np.open++
		np.refilling[key]++
		np.refillDials++
		dials = append(dials, refillDial{np: np, target: t, login: login, key: key, gen: np.gen})
	}
	p.maintenance.Add(len(dials))
	p.mu.Unlock()
	for _, d := range dials {
		go p.refillOne(context.Background(), d)
	}
}
