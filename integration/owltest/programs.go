package owltest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// CleanEnv is the process environment without libpq, psql and pgowl
// settings, so that only what a test sets reaches the programs it runs.
func CleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "PSQL") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// PGBinary returns the path of a PostgreSQL client program, preferring the
// installation the clusters run from, or skips t when there is none.
func PGBinary(t testing.TB, name string) string {
	t.Helper()
	candidate := filepath.Join(cluster.Options{}.ResolvedBinDir(), name)
	if info, err := os.Stat(candidate); err == nil && !info.IsDir() {
		return candidate
	}
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	t.Skipf("skipping: %s not found in %s or on PATH", name, cluster.Options{}.ResolvedBinDir())
	return ""
}

// CmdResult is what a finished program produced.
type CmdResult struct {
	Stdout, Stderr string
	ExitCode       int
	// TimedOut says the program was killed at the time limit; the caller
	// fails the test, showing as much of the output as it finds useful.
	TimedOut bool
}

// RunCmd runs a program in dir (empty: the current directory) within
// timeout, with CleanEnv plus env as its environment. A program that cannot
// be run fails t.
func RunCmd(t testing.TB, timeout time.Duration, dir string, env []string, name string, args ...string) CmdResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(CleanEnv(), env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := CmdResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.TimedOut = true
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", name, err)
	}
	return res
}
