package proxy

import (
	"context"
	"sync"

	"github.com/pgowl/pgowl/monitor"
	"github.com/pgowl/pgowl/route"
)

// switchableNodes is the node monitor in use, which a reload that adds or
// removes nodes replaces by one polling the new list. Readers see one
// monitor's snapshots at a time; a WaitFor in progress moves to the new
// monitor when it is swapped in.
type switchableNodes struct {
	mu      sync.Mutex
	current *monitor.Monitor
	// swapped is closed and replaced each time current changes.
	swapped chan struct{}
}

func newSwitchableNodes(m *monitor.Monitor) *switchableNodes {
	return &switchableNodes{current: m, swapped: make(chan struct{})}
}

func (n *switchableNodes) monitor() (*monitor.Monitor, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.current, n.swapped
}

// swap puts m in use and returns the monitor it replaces.
func (n *switchableNodes) swap(m *monitor.Monitor) *monitor.Monitor {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.current
	n.current = m
	close(n.swapped)
	n.swapped = make(chan struct{})
	return old
}

// Snapshot returns the latest snapshot of the monitor in use.
func (n *switchableNodes) Snapshot() *route.Snapshot {
	m, _ := n.monitor()
	return m.Snapshot()
}

// WaitFor blocks until cond holds for a snapshot of the monitor in use, or ctx ends.
func (n *switchableNodes) WaitFor(ctx context.Context, cond func(*route.Snapshot) bool) bool {
	for {
		m, swapped := n.monitor()
		waitCtx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-swapped:
				cancel()
			case <-waitCtx.Done():
			}
		}()
		ok := m.WaitFor(waitCtx, cond)
		cancel()
		if ok {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
}
