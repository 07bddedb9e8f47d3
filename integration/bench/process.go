package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a daemon gets to exit after SIGTERM before its process group is killed.
const stopGrace = 5 * time.Second

// daemon is a long-running child process (a proxy) in its own process group, logging to a file.
type daemon struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{}
	waitErr error
	// exitNote describes the exit once noticed (see target.noteExit).
	exitNote string
}

// startDaemon starts argv in dir as owner (nil: as ourselves), with output to logPath.
// The child is killed if this process dies (Pdeathsig).
func startDaemon(name, dir, logPath string, owner *syscall.Credential, env []string, argv ...string) (*daemon, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = nil
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: owner}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

// pid returns the daemon's process id.
func (d *daemon) pid() int {
	return d.cmd.Process.Pid
}

// exited reports whether the daemon's main process has ended.
func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the daemon's process group, then SIGKILL after stopGrace, and waits.
// It is safe to call more than once.
func (d *daemon) stop() {
	group := -d.pid()
	if !d.exited() {
		_ = syscall.Kill(group, syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(stopGrace):
		}
	}
	// Whatever is left of the group (children of a forking server) goes too.
	_ = syscall.Kill(group, syscall.SIGKILL)
	select {
	case <-d.done:
	case <-time.After(stopGrace):
	}
	_ = d.logFile.Close()
}

// logTail returns the last lines of the daemon's log.
func (d *daemon) logTail(lines int) string {
	content, err := os.ReadFile(d.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(content), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// postgresOwner returns the postgres account's credentials when running as root (PostgreSQL,
// PgBouncer and pgpool-II refuse root), and nil otherwise.
func postgresOwner() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	account, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs an operating-system user postgres: %w", err)
	}
	uid, err := strconv.ParseUint(account.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(account.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// chownTree gives dir and everything below it to owner; nil owner does nothing.
func chownTree(dir string, owner *syscall.Credential) error {
	if owner == nil {
		return nil
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(owner.Uid), int(owner.Gid))
	})
}

// freePorts returns count distinct free TCP ports on 127.0.0.1.
func freePorts(count int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	var ports []int
	for range count {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// clockTicks is the kernel's USER_HZ, the unit of CPU times in /proc/<pid>/stat.
var clockTicks = func() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
}()

// procStat is the part of /proc/<pid>/stat we use.
type procStat struct {
	ppid int
	// ticks is utime+stime+cutime+cstime: the process's CPU time plus that of its reaped children.
	ticks int64
}

// readProcStat parses /proc/<pid>/stat.
func readProcStat(pid int) (procStat, bool) {
	content, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	text := string(content)
	// The command name may contain spaces and parentheses; fields resume after the last ')'.
	end := strings.LastIndexByte(text, ')')
	if end < 0 {
		return procStat{}, false
	}
	fields := strings.Fields(text[end+1:])
	// fields[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
	if len(fields) < 15 {
		return procStat{}, false
	}
	var s procStat
	s.ppid, _ = strconv.Atoi(fields[1])
	for _, f := range fields[11:15] {
		v, _ := strconv.ParseInt(f, 10, 64)
		s.ticks += v
	}
	return s, true
}

// procTable is one pass over /proc: every process's CPU ticks and children.
type procTable struct {
	stats    map[int]procStat
	children map[int][]int
}

// readProcTable scans /proc; without /proc it is empty.
func readProcTable() procTable {
	table := procTable{stats: map[int]procStat{}, children: map[int][]int{}}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return table
	}
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		if s, ok := readProcStat(pid); ok {
			table.stats[pid] = s
			table.children[s.ppid] = append(table.children[s.ppid], pid)
		}
	}
	return table
}

// treeTicks returns the CPU ticks of root and all its live descendants (each including the
// children it has reaped).
func (p procTable) treeTicks(root int) int64 {
	var ticks int64
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		ticks += p.stats[pid].ticks
		queue = append(queue, p.children[pid]...)
	}
	return ticks
}

// ticksToDuration converts clock ticks to a duration.
func ticksToDuration(ticks int64) time.Duration {
	return time.Duration(ticks) * time.Second / time.Duration(clockTicks)
}

// busyTicks returns the machine's total non-idle CPU ticks from /proc/stat (user, nice, system,
// irq, softirq, steal), or -1 if unknown.
func busyTicks() int64 {
	content, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(content), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return -1
	}
	var busy int64
	for _, index := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseInt(fields[index], 10, 64)
		busy += v
	}
	return busy
}

// peakRSS returns a process's VmHWM (peak resident set size) in KiB, or 0 if unknown.
func peakRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				v, _ := strconv.ParseInt(fields[0], 10, 64)
				return v
			}
		}
	}
	return 0
}
