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
}

func (m cpuMeter) read() cpuReading {
	var r cpuReading
	var usage syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &usage) == nil {
		r.self = time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
	}
	if m.proxyPID != 0 {
		r.proxy = threadsOnCPU(m.proxyPID)
	}
	var memory runtime.MemStats
	runtime.ReadMemStats(&memory)
	r.allocated = memory.TotalAlloc
	return r
}

// since returns the CPU time used from earlier to r.
func (r cpuReading) since(earlier cpuReading) cpuReading {
	return cpuReading{self: r.self - earlier.self, proxy: r.proxy - earlier.proxy, allocated: r.allocated - earlier.allocated}
}

// threadsOnCPU returns the time process pid's threads have run so far, in nanoseconds as the
// scheduler counts it (/proc/PID/task/*/schedstat): the clock-tick counters of /proc/PID/stat are
// too coarse for a run of a few hundred milliseconds. A thread that ended takes its time with
// it; Go's threads live as long as the process.
func threadsOnCPU(pid int) time.Duration {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, path := range tasks {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended meanwhile
		}
		fields := strings.Fields(string(data))
		if len(fields) == 0 {
			continue
		}
		if ns, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			total += time.Duration(ns)
		}
	}
	return total
}
