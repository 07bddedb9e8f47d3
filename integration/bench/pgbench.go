package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pgbenchGrace is how long a pgbench run may take beyond its -T duration (connecting 64
// clients, the final report) before it is killed and counted as failed.
const pgbenchGrace = 90 * time.Second

// runResult is what one pgbench run against one target produced.
type runResult struct {
	// failed is set when a client aborted, pgbench exited non-zero or printed no result.
	failed bool
	// errLine is pgbench's first error line when failed.
	errLine string
	// detail is pgbench's whole stderr when failed.
	detail string
	// tps is transactions per second without initial connection time.
	tps float64
	// latencyMS is pgbench's "latency average".
	latencyMS float64
	// connMS is pgbench's "initial connection time".
	connMS float64
	// transactions is the number of transactions actually processed.
	transactions int64
	// statements is the number of SQL statements those transactions sent.
	statements int64
	// failedTx is pgbench's "number of failed transactions" (serialization and deadlock failures).
	failedTx int64
	// cpu is the proxy's CPU time over the run; hasCPU is false for the direct target.
	cpu    time.Duration
	hasCPU bool
	// otherCores is the CPU, in cores, that processes outside the benchmark used during the run.
	otherCores float64
	// notices is the number of NOTICEs the clients received.
	notices int64
}

var (
	tpsPattern       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	latencyPattern   = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
	connPattern      = regexp.MustCompile(`(?m)^initial connection time = ([0-9.]+) ms`)
	processedPattern = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	failedPattern    = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
	// scriptPattern matches one script's section of a multi-script report: its file and transactions.
	scriptPattern = regexp.MustCompile(`(?m)^SQL script \d+: (\S+)\n - weight: \d+.*\n - (\d+) transactions`)
)

// parsePgbench reads pgbench's report; exitErr is the error of the pgbench process, if any.
func parsePgbench(w workload, stdout, stderr string, exitErr error) runResult {
	var r runResult
	float := func(pattern *regexp.Regexp) (float64, bool) {
		m := pattern.FindStringSubmatch(stdout)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return v, err == nil
	}
	integer := func(pattern *regexp.Regexp) (int64, bool) {
		m := pattern.FindStringSubmatch(stdout)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseInt(m[1], 10, 64)
		return v, err == nil
	}
	tps, haveTPS := float(tpsPattern)
	r.tps = tps
	r.latencyMS, _ = float(latencyPattern)
	r.connMS, _ = float(connPattern)
	r.transactions, _ = integer(processedPattern)
	r.failedTx, _ = integer(failedPattern)
	r.statements = countStatements(w, stdout, r.transactions)

	aborted := strings.Contains(stderr, "aborted")
	switch {
	case exitErr != nil || aborted:
		r.failed = true
	case !haveTPS || r.transactions == 0:
		r.failed = true
	}
	if r.failed {
		r.errLine = firstError(stderr)
		if r.errLine == "" && exitErr != nil {
			r.errLine = "pgbench: " + exitErr.Error()
		}
		switch {
		case r.errLine != "":
		case haveTPS:
			r.errLine = fmt.Sprintf("no transaction completed within the run (initial connection time %.0f ms)", r.connMS)
		case exitErr == nil && processedPattern.MatchString(stdout):
			// pgbench's -T clock includes connecting: the clients were still connecting when it ran out.
			r.errLine = "no transaction completed: connecting the clients took the whole -T duration"
		default:
			r.errLine = "pgbench printed no result"
		}
	}
	return r
}

// countStatements returns the SQL statements the run's transactions sent: per script for a
// custom workload (from the per-script counts), or transactions × statements for a built-in.
func countStatements(w workload, stdout string, transactions int64) int64 {
	if len(w.scripts) == 0 {
		return transactions * int64(w.statements)
	}
	perScript := map[string]int{}
	for _, s := range w.scripts {
		perScript[s.name] = s.statements
	}
	var total int64
	matches := scriptPattern.FindAllStringSubmatch(stdout, -1)
	for _, m := range matches {
		count, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			continue
		}
		total += count * int64(perScript[filepath.Base(m[1])])
	}
	if len(matches) == 0 {
		// No per-script section: estimate from the weights.
		var weighted, weights int
		for _, s := range w.scripts {
			weighted += s.weight * s.statements
			weights += s.weight
		}
		total = transactions * int64(weighted) / int64(weights)
	}
	return total
}

// firstError picks the most telling line of pgbench's stderr: the first error, skipping the
// closing "Run was aborted" summary, else the first non-empty line.
func firstError(stderr string) string {
	var fallback string
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if fallback == "" {
			fallback = line
		}
		if strings.Contains(line, "Run was aborted") {
			continue
		}
		lower := strings.ToLower(line)
		if strings.Contains(lower, "error") || strings.Contains(lower, "fatal") || strings.Contains(lower, "aborted") {
			return line
		}
	}
	return fallback
}

// pgbenchRunner runs pgbench with fixed client settings.
type pgbenchRunner struct {
	// path is the pgbench binary.
	path string
	// env is the environment of every run, without PGHOST and PGPORT.
	env []string
	// scriptDir holds the custom script files and is pgbench's working directory.
	scriptDir string
}

// clientEnv returns our environment without libpq variables, plus the benchmark user's login.
func clientEnv(user, password, database string) []string {
	var env []string
	for _, entry := range os.Environ() {
		if strings.HasPrefix(entry, "PG") {
			continue
		}
		env = append(env, entry)
	}
	return append(env,
		"PGUSER="+user,
		"PGPASSWORD="+password,
		"PGDATABASE="+database,
		"PGSSLMODE=disable",
		"PGAPPNAME=pgowl-bench",
		"PGCONNECT_TIMEOUT=10",
	)
}

// pgbenchOutput is what a pgbench process printed.
type pgbenchOutput struct {
	stdout string
	// stderr is without the notices' lines.
	stderr string
	// notices is the number of NOTICEs libpq printed.
	notices int64
}

// run runs pgbench with args against host:port and returns what it printed.
// pgbench runs in its own process group, killed when ctx ends or after timeout.
func (p pgbenchRunner) run(ctx context.Context, host string, port int, timeout time.Duration, args ...string) (pgbenchOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.path, args...)
	cmd.Env = append(append([]string{}, p.env...), "PGHOST="+host, "PGPORT="+strconv.Itoa(port))
	cmd.Dir = p.scriptDir
	var out bytes.Buffer
	errOut := &noticeFilter{}
	cmd.Stdout = &out
	// pgbench's stderr goes to a file, read after the run: with routing
	// notices on, libpq prints one notice per statement there, and a pipe
	// would make this process wake up to read it on the CPUs pgbench and the
	// proxies share while the run is measured.
	errFile, err := os.CreateTemp("", "pgowl-bench-stderr-*")
	if err != nil {
		return pgbenchOutput{}, err
	}
	defer os.Remove(errFile.Name())
	defer errFile.Close()
	cmd.Stderr = errFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if _, serr := errFile.Seek(0, io.SeekStart); serr != nil {
		return pgbenchOutput{}, serr
	}
	if _, cerr := io.Copy(errOut, errFile); cerr != nil {
		return pgbenchOutput{}, cerr
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("pgbench did not finish within %s", timeout)
			errOut.kept.WriteString("\npgbench: error: killed: did not finish within " + timeout.String() + "\n")
		} else {
			err = ctx.Err()
		}
	}
	return pgbenchOutput{stdout: out.String(), stderr: errOut.String(), notices: errOut.notices}, err
}

// maxStderr bounds how much of pgbench's stderr (without notices) is kept.
const maxStderr = 1 << 20

// noticeFilter is pgbench's stderr: it counts and drops the NOTICE and DETAIL lines libpq prints
// for every notice (pgowl sends one per statement with routing.notice on) and keeps the rest.
type noticeFilter struct {
	kept    bytes.Buffer
	partial []byte
	notices int64
	// inNotice: the last line kept or dropped belonged to a notice.
	inNotice bool
}

// Write splits p into lines and keeps those that are not part of a notice.
func (f *noticeFilter) Write(p []byte) (int, error) {
	f.partial = append(f.partial, p...)
	for {
		end := bytes.IndexByte(f.partial, '\n')
		if end < 0 {
			break
		}
		f.line(f.partial[:end+1])
		f.partial = f.partial[end+1:]
	}
	return len(p), nil
}

// line handles one complete line. DETAIL and HINT lines are dropped only
// after a NOTICE: an error's DETAIL (pgowl's per-node state) is kept.
func (f *noticeFilter) line(line []byte) {
	switch {
	case bytes.HasPrefix(line, []byte("NOTICE:")):
		f.notices++
		f.inNotice = true
	case f.inNotice && (bytes.HasPrefix(line, []byte("DETAIL:")) || bytes.HasPrefix(line, []byte("HINT:"))):
	default:
		f.inNotice = false
		if f.kept.Len() < maxStderr {
			f.kept.Write(line)
		}
	}
}

// String returns the kept lines, including an unfinished last line.
func (f *noticeFilter) String() string {
	if len(f.partial) > 0 {
		f.line(append(f.partial, '\n'))
		f.partial = nil
	}
	return f.kept.String()
}
