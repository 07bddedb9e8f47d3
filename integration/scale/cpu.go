package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// cpuSnapshot is the CPU time spent so far, by the machine and by this run's processes, in
// clock ticks.
type cpuSnapshot struct {
	at          time.Time
	machineBusy int64 // every CPU, all processes and the kernel: /proc/stat minus idle and iowait
	machineAll  int64
	self        int64 // this command (the clients)
	pgowl       int64
	nodes       int64 // the PostgreSQL servers: postmasters, their live children, and reaped children
}

// cpuUse is the CPU a phase used, in CPUs (1.0 = one CPU busy all the time).
type cpuUse struct {
	machineBusy, self, pgowl, nodes, others float64
	cpus                                    float64 // CPUs the machine has, from /proc/stat's totals
	loadavg                                 string  // /proc/loadavg at the end of the phase
}

// procTicks is one process's CPU ticks: its own, and its reaped children's.
type procTicks struct {
	parent      int
	own, reaped int64
}

// readProcTicks reads /proc/<pid>/stat.
func readProcTicks(pid string) (procTicks, bool) {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procTicks{}, false
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return procTicks{}, false
	}
	// After the command: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
	f := strings.Fields(string(stat)[i+1:])
	if len(f) < 15 {
		return procTicks{}, false
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	return procTicks{parent: int(n(1)), own: n(11) + n(12), reaped: n(13) + n(14)}, true
}

// cpuProbe knows this run's processes.
type cpuProbe struct {
	pgowlPID    int
	postmasters []int
}

// newCPUProbe finds the nodes' postmasters.
func newCPUProbe(p *pgowlProcess, cl *cluster.Cluster) (*cpuProbe, error) {
	probe := &cpuProbe{pgowlPID: p.pid}
	for _, n := range cl.Nodes {
		pid, err := n.PostmasterPID()
		if err != nil {
			return nil, err
		}
		probe.postmasters = append(probe.postmasters, pid)
	}
	return probe, nil
}

// snapshot reads the machine's and this run's CPU time.
func (c *cpuProbe) snapshot() cpuSnapshot {
	return takeCPUSnapshot(c.pgowlPID, c.postmasters)
}

// takeCPUSnapshot reads the machine's and this run's CPU time.
func takeCPUSnapshot(pgowlPID int, postmasters []int) cpuSnapshot {
	s := cpuSnapshot{at: time.Now()}
	if content, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(content), "\n")
		f := strings.Fields(line)
		if len(f) >= 9 && f[0] == "cpu" {
			for k := 1; k <= 8; k++ { // user nice system idle iowait irq softirq steal
				v, _ := strconv.ParseInt(f[k], 10, 64)
				s.machineAll += v
				if k != 4 && k != 5 {
					s.machineBusy += v
				}
			}
		}
	}
	if t, ok := readProcTicks("self"); ok {
		s.self = t.own
	}
	if t, ok := readProcTicks(strconv.Itoa(pgowlPID)); ok {
		s.pgowl = t.own
	}
	roots := map[int]bool{}
	for _, pid := range postmasters {
		roots[pid] = true
	}
	entries, _ := os.ReadDir("/proc")
	table := map[int]procTicks{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, ok := readProcTicks(e.Name()); ok {
			table[pid] = t
		}
	}
	for pid, t := range table {
		for p, depth := pid, 0; p > 1 && depth < 8; depth++ {
			if roots[p] {
				s.nodes += t.own
				if p == pid {
					s.nodes += t.reaped
				}
				break
			}
			p = table[p].parent
		}
	}
	return s
}

// since returns the CPU used between earlier and s.
func (s cpuSnapshot) since(earlier cpuSnapshot) cpuUse {
	wall := s.at.Sub(earlier.at).Seconds()
	if wall <= 0 {
		return cpuUse{}
	}
	cpus := func(ticks int64) float64 { return float64(ticks) / clockTicks / wall }
	u := cpuUse{
		machineBusy: cpus(s.machineBusy - earlier.machineBusy),
		self:        cpus(s.self - earlier.self),
		pgowl:       cpus(s.pgowl - earlier.pgowl),
		nodes:       cpus(s.nodes - earlier.nodes),
		cpus:        cpus(s.machineAll - earlier.machineAll),
	}
	u.others = max(u.machineBusy-u.self-u.pgowl-u.nodes, 0)
	if content, err := os.ReadFile("/proc/loadavg"); err == nil {
		u.loadavg = strings.Join(strings.Fields(string(content))[:3], " ")
	}
	return u
}

// String renders the use for the report.
func (u cpuUse) String() string {
	return fmt.Sprintf("machine busy %.2f of %.0f CPUs: pgowl %.2f, the PostgreSQL nodes %.2f, this command's clients %.2f, "+
		"other processes and the kernel %.2f (load average %s)", u.machineBusy, u.cpus, u.pgowl, u.nodes, u.self, u.others, u.loadavg)
}
