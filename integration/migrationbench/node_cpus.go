package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pgowl/pgowl/internal/cluster"
)

// cpuSplit is -node-cpus: the CPUs the node's processes run on, and the rest of the CPUs this
// process may use, which this process (the clients, and pgowl when it runs here) and the proxies
// it starts (pgowl with -process, PgBouncer) run on. Unsplit, the kernel places every process; on
// a machine of two CPUs that packs the client, the proxy and the node's backend onto one CPU as
// often as not, so that the work a proxy does while the node runs a statement delays the node.
// Split, the node has CPUs of its own, as a database server has: what a proxy does then competes
// only with the client.
type cpuSplit struct {
	node, rest []int
}

// newCPUSplit splits the CPUs this process may use (allowed) into nodeList's and the rest. Either
// side empty is an error: the split would leave the node, or everything else, nowhere to run.
func newCPUSplit(nodeList string, allowed []int) (*cpuSplit, error) {
	node, err := parseCPUList(nodeList)
	if err != nil {
		return nil, err
	}
	split := &cpuSplit{}
	for _, cpu := range node {
		if !slices.Contains(allowed, cpu) {
			return nil, fmt.Errorf("-node-cpus %q: CPU %d is not one this process may use (%s)", nodeList, cpu, formatCPUList(allowed))
		}
		split.node = append(split.node, cpu)
	}
	for _, cpu := range allowed {
		if !slices.Contains(node, cpu) {
			split.rest = append(split.rest, cpu)
		}
	}
	if len(split.rest) == 0 {
		return nil, fmt.Errorf("-node-cpus %q takes every CPU this process may use (%s): the client and the proxies would have none", nodeList, formatCPUList(allowed))
	}
	return split, nil
}

// maxCPUs is how many CPUs an affinity mask (unix.CPUSet) can name.
const maxCPUs = len(unix.CPUSet{}) * 64

// parseCPUList reads a CPU list as taskset -c and /sys/devices/system/cpu/online write it:
// numbers and ranges separated by commas ("1", "2-3", "0,4-5"), each CPU once, in ascending order.
func parseCPUList(list string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(list, ",") {
		low, high, isRange := strings.Cut(strings.TrimSpace(part), "-")
		first, err := strconv.Atoi(low)
		last := first
		if err == nil && isRange {
			last, err = strconv.Atoi(high)
		}
		if err != nil || first < 0 || last < first || last >= maxCPUs {
			return nil, fmt.Errorf("CPU list %q: %q is neither a CPU number nor a range of them", list, part)
		}
		for cpu := first; cpu <= last; cpu++ {
			cpus = append(cpus, cpu)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// formatCPUList writes cpus (ascending) as a CPU list, consecutive CPUs as a range.
func formatCPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i])+"-"+strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// allowedCPUs returns the CPUs this process may run on now.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("read this process's CPUs: %w", err)
	}
	return cpusOf(&set), nil
}

func cpusOf(set *unix.CPUSet) []int {
	var cpus []int
	for cpu := 0; cpu < maxCPUs; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}

func cpuSetOf(cpus []int) *unix.CPUSet {
	var set unix.CPUSet
	for _, cpu := range cpus {
		set.Set(cpu)
	}
	return &set
}

// pinProcess restricts every thread of process pid to cpus. A thread a process starts takes the
// CPUs of the thread that started it, so once every thread is pinned the process stays pinned,
// and so do the processes it starts afterwards; pinProcess goes over the threads until a pass
// finds none unpinned, so that a thread started during a pass is not missed.
func pinProcess(pid int, cpus []int) error {
	want := cpuSetOf(cpus)
	for pass := 0; pass < 10; pass++ {
		threads, err := threadAffinities(pid)
		if err != nil {
			return err
		}
		changed := false
		for tid, have := range threads {
			if have == *want {
				continue
			}
			if err := unix.SchedSetaffinity(tid, want); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // the thread ended meanwhile
				}
				return fmt.Errorf("pin thread %d of process %d to CPUs %s: %w", tid, pid, formatCPUList(cpus), err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("process %d kept starting threads while its threads were pinned to CPUs %s", pid, formatCPUList(cpus))
}

// threadAffinities returns the CPUs each thread of process pid may run on, by thread id. A thread
// that ends while they are read is left out.
func threadAffinities(pid int) (map[int]unix.CPUSet, error) {
	paths, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("list the threads of process %d: %v", pid, err)
	}
	threads := make(map[int]unix.CPUSet, len(paths))
	for _, path := range paths {
		tid, err := strconv.Atoi(filepath.Base(path))
		if err != nil {
			continue
		}
		var have unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &have); err != nil {
			continue // the thread ended meanwhile
		}
		threads[tid] = have
	}
	return threads, nil
}

// pinNode pins every process of node (the postmaster, its backends and the server's own
// processes) to cpus. The backends it starts later are the postmaster's children and start on
// its CPUs.
func pinNode(node *cluster.Node, cpus []int) error {
	pids, err := node.ServerPIDs()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := pinProcess(pid, cpus); err != nil {
			if _, statErr := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); statErr != nil && pid != pids[0] {
				continue // a child that ended meanwhile
			}
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
	}
	return nil
}

// describe says, for the report, where the processes ran.
func (s *cpuSplit) describe() string {
	if s == nil {
		return "Every process runs where the kernel places it."
	}
	return fmt.Sprintf("The node's processes run on CPU(s) %s alone (`-node-cpus`); this process (the clients, and pgowl when it runs here) and the proxies' processes on CPU(s) %s: the node has CPUs of its own, as a database server has, and the work a proxy does while the node runs a statement competes with the client, not with the node.",
		formatCPUList(s.node), formatCPUList(s.rest))
}
