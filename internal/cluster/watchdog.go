package cluster

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// watchdogScript runs detached next to a cluster and shuts it down if the process that started
// it dies without calling Close (a test binary killed by -timeout, a benchmark killed with SIGKILL).
// It exits on its own once Close has removed the cluster directory. Arguments: $1 is the pid
// to watch, $2 the cluster directory. Postmasters get SIGQUIT (immediate shutdown, which also
// releases their shared memory), stragglers SIGKILL after ten seconds, then the directory goes.
const watchdogScript = `
parent=$1
dir=$2
while kill -0 "$parent" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done
[ -d "$dir" ] || exit 0
postmasters() {
	for pidfile in "$dir"/*/data/postmaster.pid; do
		[ -f "$pidfile" ] || continue
		pid=$(head -n 1 "$pidfile")
		case "$pid" in ''|*[!0-9]*) continue ;; esac
		if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir/"; then echo "$pid"; fi
	done
}
for pid in $(postmasters); do kill -QUIT "$pid" 2>/dev/null; done
tries=0
while [ -n "$(postmasters)" ] && [ "$tries" -lt 100 ]; do sleep 0.1; tries=$((tries + 1)); done
for pid in $(postmasters); do kill -KILL "$pid" 2>/dev/null; done
rm -rf "$dir"
`

// startWatchdog starts the watchdog for dir in its own session, as the current user (who may
// signal the servers: either their owner or root). Failing to start it only loses that safety
// net, so the failure is logged, not returned. It returns a function that stops the watchdog.
func startWatchdog(dir string, logf func(string, ...any)) (stop func()) {
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgowl-cluster-watchdog", strconv.Itoa(os.Getpid()), dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		logf("cluster: no watchdog for %s (servers outlive a crash of this process): %v", dir, err)
		return func() {}
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return func() {
		_ = cmd.Process.Kill()
		<-exited
	}
}
