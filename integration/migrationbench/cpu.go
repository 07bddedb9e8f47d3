package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMeter reads the CPU time used so far by this process (the clients, and pgowl when it runs
// here) and by the proxy a target runs through when that is a process of its own (pgowl with
// -process, PgBouncer). A run's CPU per statement
// varies far less between runs than its wall time does on a machine whose scheduling delays move
// a run by tens of percent: it is the measure to compare two builds by.
type cpuMeter struct {
	// proxyPID is the proxy's process, or 0 for none (a direct target, or pgowl in this process).
	proxyPID int
}

// cpuReading is the CPU time used so far, by this process and by the proxy's process, and the
// bytes this process allocated so far (its heap: the clients', and pgowl's when it runs here),
// which drive the garbage collector's share of that CPU and vary little between runs.
type cpuReading struct {
	self, proxy time.Duration
	allocated   uint64
	// selfWait and proxyWait are the time the threads of this process and of the proxy's spent
	// runnable but waiting for a CPU (the second field of /proc/PID/task/*/schedstat): on a
	// machine with fewer CPUs than the client, the proxy and the node's backend keep busy, what
	// the one that woke another waits while the other runs in its place.
	selfWait, proxyWait time.Duration
	// node and nodeWait are the same for PostgreSQL's processes (every process named
	// postgres: the backends, and the server's own): what the node ran, and how long it waited
	// for a CPU, while a run's statements ran.
	node, nodeWait time.Duration
}

func (m cpuMeter) read() cpuReading {
	var r cpuReading
	var usage syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &usage) == nil {
		r.self = time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
	}
	_, r.selfWait = threadsOnCPU(os.Getpid())
	r.node, r.nodeWait = postgresOnCPU()
	if m.proxyPID != 0 {
		r.proxy, r.proxyWait = threadsOnCPU(m.proxyPID)
	}
	var memory runtime.MemStats
	runtime.ReadMemStats(&memory)
	r.allocated = memory.TotalAlloc
	return r
}

// since returns the CPU time used from earlier to r.
func (r cpuReading) since(earlier cpuReading) cpuReading {
	return cpuReading{self: r.self - earlier.self, proxy: r.proxy - earlier.proxy, allocated: r.allocated - earlier.allocated,
		selfWait: r.selfWait - earlier.selfWait, proxyWait: r.proxyWait - earlier.proxyWait,
		node: r.node - earlier.node, nodeWait: r.nodeWait - earlier.nodeWait}
}

// threadsOnCPU returns the time process pid's threads have run so far, and the time they have
// waited on a run queue, in nanoseconds as the scheduler counts them (/proc/PID/task/*/schedstat):
// the clock-tick counters of /proc/PID/stat are too coarse for a run of a few hundred
// milliseconds. A thread that ended takes its time with it; Go's threads live as long as the
// process.
func threadsOnCPU(pid int) (onCPU, waiting time.Duration) {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	if err != nil {
		return 0, 0
	}
	for _, path := range tasks {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended meanwhile
		}
		fields := strings.Fields(string(data))
		if len(fields) < 2 {
			continue
		}
		if ns, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			onCPU += time.Duration(ns)
		}
		if ns, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
			waiting += time.Duration(ns)
		}
	}
	return onCPU, waiting
}

// postgresOnCPU is threadsOnCPU summed over the processes named postgres (/proc/PID/comm): the
// benchmark's cluster is the only one it starts. A backend that ended meanwhile takes its time
// with it: the runs keep one connection each, opened before the first reading.
func postgresOnCPU() (onCPU, waiting time.Duration) {
	comms, err := filepath.Glob("/proc/[0-9]*/comm")
	if err != nil {
		return 0, 0
	}
	for _, path := range comms {
		comm, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		on, wait := threadsOnCPU(pid)
		onCPU += on
		waiting += wait
	}
	return onCPU, waiting
}
