package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// aptTimeout bounds apt-get update and apt-get install together.
const aptTimeout = 8 * time.Minute

// findBinary returns the path of name on PATH or in one of dirs, or "".
func findBinary(name string, dirs ...string) string {
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	for _, dir := range dirs {
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err == nil && !info.IsDir() && info.Mode().Perm()&0o111 != 0 {
			return path
		}
	}
	return ""
}

// proxyBinaries are the PgBouncer and pgpool-II executables, "" when missing, with why.
type proxyBinaries struct {
	pgbouncer, pgpool         string
	pgbouncerNote, pgpoolNote string
}

// sbinDirs are where Debian installs the proxies when PATH lacks the sbin directories.
var sbinDirs = []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin"}

// ensureProxies finds pgbouncer and pgpool, installing the Debian packages pgbouncer and
// pgpool2 with apt-get when one is missing and we are root.
func ensureProxies(ctx context.Context, logf func(string, ...any)) proxyBinaries {
	var b proxyBinaries
	b.pgbouncer = findBinary("pgbouncer", sbinDirs...)
	b.pgpool = findBinary("pgpool", sbinDirs...)
	var missing []string
	if b.pgbouncer == "" {
		missing = append(missing, "pgbouncer")
	}
	if b.pgpool == "" {
		missing = append(missing, "pgpool2")
	}
	if len(missing) == 0 {
		return b
	}
	var installErr string
	if os.Geteuid() != 0 {
		installErr = "not installed, and installing needs root (apt-get install " + strings.Join(missing, " ") + ")"
	} else {
		logf("installing %s with apt-get", strings.Join(missing, " "))
		ctx, cancel := context.WithTimeout(ctx, aptTimeout)
		defer cancel()
		if out, err := apt(ctx, "update"); err != nil {
			installErr = fmt.Sprintf("apt-get update failed: %v: %s", err, lastLine(out))
		} else if out, err := apt(ctx, append([]string{"install", "-y", "-q"}, missing...)...); err != nil {
			installErr = fmt.Sprintf("apt-get install %s failed: %v: %s", strings.Join(missing, " "), err, lastLine(out))
		}
		b.pgbouncer = findBinary("pgbouncer", sbinDirs...)
		b.pgpool = findBinary("pgpool", sbinDirs...)
	}
	if b.pgbouncer == "" {
		b.pgbouncerNote = "pgbouncer is missing: " + installErr
	}
	if b.pgpool == "" {
		b.pgpoolNote = "pgpool is missing: " + installErr
	}
	return b
}

// apt runs apt-get non-interactively, waiting for another apt to release its lock.
func apt(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-o", "DPkg::Lock::Timeout=180"}, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// lastLine returns the last non-empty line of text.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// firstLine returns the first non-empty line of text.
func firstLine(text string) string {
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

// commandOutput runs a short command and returns its trimmed combined output, or "unknown".
func commandOutput(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	// Only the end is trimmed: the first line of a table (free -g) starts with spaces.
	text := strings.TrimRight(string(out), " \n")
	if err != nil && text == "" {
		return "unknown (" + err.Error() + ")"
	}
	return text
}

// machine describes the computer the benchmark ran on.
type machine struct {
	cpus   string
	cpu    string
	memory string
	kernel string
}

// describeMachine reads nproc, free -g, uname and /proc/cpuinfo.
func describeMachine(ctx context.Context) machine {
	m := machine{
		cpus:   commandOutput(ctx, "nproc"),
		memory: strings.Trim(commandOutput(ctx, "free", "-g"), "\n"),
		kernel: commandOutput(ctx, "uname", "-srm"),
		cpu:    "unknown",
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		scanner := bufio.NewScanner(f)
		for scanner.Scan() {
			if name, value, ok := strings.Cut(scanner.Text(), ":"); ok && strings.TrimSpace(name) == "model name" {
				m.cpu = strings.TrimSpace(value)
				break
			}
		}
	}
	return m
}

// versions are the tools' version strings, in report order.
type versions [][2]string

// collectVersions asks every tool for its version.
func collectVersions(ctx context.Context, pgbench, pgowl string, b proxyBinaries) versions {
	v := versions{
		{"pgbench", firstLine(commandOutput(ctx, pgbench, "--version"))},
		{"PostgreSQL", firstLine(commandOutput(ctx, filepath.Join(cluster.Options{}.ResolvedBinDir(), "postgres"), "--version"))},
	}
	if b.pgbouncer != "" {
		v = append(v, [2]string{"PgBouncer", firstLine(commandOutput(ctx, b.pgbouncer, "--version"))})
	}
	if b.pgpool != "" {
		v = append(v, [2]string{"pgpool-II", firstLine(commandOutput(ctx, b.pgpool, "--version"))})
	}
	if pgowl != "" {
		v = append(v, [2]string{"pgowl", firstLine(commandOutput(ctx, pgowl, "version"))})
	}
	v = append(v, [2]string{"go", firstLine(commandOutput(ctx, "go", "version"))})
	return v
}

// lastLines returns the last n non-empty lines of text.
func lastLines(text string, n int) string {
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// describeBuild says which commit pgowl was built from and, for a working-tree build, which
// files differed from it.
func describeBuild(ctx context.Context, moduleDir string, fromHead bool) string {
	commit := commandOutput(ctx, "git", "-C", moduleDir, "log", "-1", "--format=%h %s")
	if fromHead {
		return "commit `" + commit + "` (HEAD, exported with git archive; uncommitted changes in the checkout are not measured)"
	}
	status := commandOutput(ctx, "git", "-C", moduleDir, "status", "--porcelain", "--untracked-files=normal")
	var changed []string
	for _, line := range strings.Split(status, "\n") {
		if len(line) > 3 {
			changed = append(changed, strings.TrimSpace(line[3:]))
		}
	}
	if len(changed) == 0 {
		return "commit `" + commit + "`, clean working tree"
	}
	return fmt.Sprintf("the working tree: commit `%s` plus uncommitted changes in %d path(s): %s",
		commit, len(changed), strings.Join(changed, ", "))
}
