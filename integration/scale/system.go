package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// machine describes where the run happened.
type machine struct {
	cpu, kernel, memory, postgres, goVersion string
	cpus                                     int
	loadavg                                  string // at the start
}

// describeMachine reads the CPU model, memory, kernel and PostgreSQL version.
func describeMachine(ctx context.Context, cl *cluster.Cluster) machine {
	m := machine{cpus: runtime.NumCPU(), goVersion: runtime.Version(), cpu: "unknown", memory: "unknown", kernel: "unknown"}
	if content, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(content), "\n") {
			if rest, ok := strings.CutPrefix(line, "model name"); ok {
				m.cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
				break
			}
		}
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		scanner := bufio.NewScanner(f)
		for scanner.Scan() {
			if rest, ok := strings.CutPrefix(scanner.Text(), "MemTotal:"); ok {
				var kib int64
				fmt.Sscan(strings.TrimSpace(rest), &kib)
				m.memory = fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20))
			}
		}
		f.Close()
	}
	if content, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(content))
	}
	if content, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.loadavg = strings.Join(strings.Fields(string(content))[:3], " ")
	}
	m.postgres = commandOutput(ctx, filepath.Join(cluster.Options{}.ResolvedBinDir(), "postgres"), "--version")
	return m
}

// describeBuild names the source pgowl was built from: the commit and whether the working tree
// differs from it, and what `pgowl version` says.
func describeBuild(ctx context.Context, moduleDir, binary string) string {
	commit := commandOutput(ctx, "git", "-C", moduleDir, "rev-parse", "--short", "HEAD")
	status := commandOutput(ctx, "git", "-C", moduleDir, "status", "--porcelain", "--untracked-files=no")
	state := "clean working tree"
	if status != "" && status != "unknown" {
		state = fmt.Sprintf("working tree with %d modified tracked files", len(strings.Split(status, "\n")))
	}
	return fmt.Sprintf("commit %s, %s; `pgowl version`: %s", commit, state, commandOutput(ctx, binary, "version"))
}

// commandOutput runs a short command and returns its trimmed output, or "unknown".
func commandOutput(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// summarizePgowlLog groups pgowl's JSON log lines by level, message and error.
func summarizePgowlLog(path string) logSummary {
	var s logSummary
	content, err := os.ReadFile(path)
	if err != nil {
		s.problems = err.Error()
		return s
	}
	byKey := map[string]*logKind{}
	for _, line := range strings.Split(string(content), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var fields map[string]any
		if json.Unmarshal([]byte(line), &fields) != nil {
			s.add(byKey, "(not JSON) "+blankDigits(truncate(line, 120)), line)
			continue
		}
		key := fmt.Sprintf("%v: %v", fields["level"], fields["message"])
		if e, ok := fields["error"]; ok {
			key += " (" + blankDigits(truncate(fmt.Sprint(e), 160)) + ")"
		}
		s.add(byKey, key, line)
	}
	s.finish(byKey)
	return s
}

// truncate shortens text to at most n bytes.
func truncate(text string, n int) string {
	if len(text) <= n {
		return text
	}
	return text[:n] + "..."
}
