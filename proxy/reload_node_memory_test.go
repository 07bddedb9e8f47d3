package proxy

import (
	"maps"
	"testing"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/monitor"
)

// TestKeptNodesMemoryForgetsRemovedAndReaddedNodes checks which monitor
// facts a node-list reload passes on: those of nodes kept with the same
// address, without divergences from a node that was removed or re-added.
func TestKeptNodesMemoryForgetsRemovedAndReaddedNodes(t *testing.T) {
	pg := func(name string, port int) config.Node { return config.Node{Name: name, Host: "127.0.0.1", Port: port} }
	memory := map[string]monitor.NodeMemory{
		"pg1": {PrimaryTimeline: 1},
		"pg2": {PrimaryTimeline: 2},
		"pg3": {DivergedFrom: "pg2", DivergedTimeline: 2},
	}
	old := config.Config{Nodes: []config.Node{pg("pg1", 1), pg("pg2", 2), pg("pg3", 3)}}
	cases := []struct {
		name  string
		nodes []config.Node
		want  map[string]monitor.NodeMemory
	}{
		{"a standby added: everything kept", []config.Node{pg("pg1", 1), pg("pg2", 2), pg("pg3", 3), pg("pg4", 4)}, memory},
		{"a standby removed: its facts go", []config.Node{pg("pg1", 1), pg("pg2", 2)},
			map[string]monitor.NodeMemory{"pg1": {PrimaryTimeline: 1}, "pg2": {PrimaryTimeline: 2}}},
		{"the promoted node removed: its timeline and the divergence from it go", []config.Node{pg("pg1", 1), pg("pg3", 3)},
			map[string]monitor.NodeMemory{"pg1": {PrimaryTimeline: 1}}},
		{"the promoted node re-added at another address: forgotten as if removed", []config.Node{pg("pg1", 1), pg("pg2", 22), pg("pg3", 3)},
			map[string]monitor.NodeMemory{"pg1": {PrimaryTimeline: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := keptNodesMemory(memory, old, config.Config{Nodes: c.nodes})
			if !maps.Equal(got, c.want) {
				t.Errorf("keptNodesMemory = %v, want %v", got, c.want)
			}
		})
	}
}
