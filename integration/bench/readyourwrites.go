package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Read your writes in the benchmark: the "pgowl" targets run with pgowl's
// default, routing.read_your_writes: session; "pgowl-ryw-off" is the same
// pgowl with it off, run only when named in -targets. The comparison
// "pgowl / pgowl-ryw-off" is its cost on each workload, and, when both run,
// readAfterWrite measures the latency a read right after a write gains.

// targetPgowlRYWOff is pgowl with routing.read_your_writes: off.
const targetPgowlRYWOff = "pgowl-ryw-off"

// readYourWritesKeys are the routing keys of a pgowl target's configuration
// that this file decides, indented for the routing block.
func readYourWritesKeys(name string) string {
	if name == targetPgowlRYWOff {
		return "  read_your_writes: off\n"
	}
	return ""
}

// readAfterWriteRounds is how many write-then-read rounds readAfterWrite
// runs on each target, in turns of readAfterWriteTurn.
const (
	readAfterWriteRounds = 2000
	readAfterWriteTurn   = 100
)

// readAfterWrite measures, on each of the targets (pgowl with
// read_your_writes on, then off), the latency of a read of one row right
// after an autocommitted update of it on the same connection, interleaved
// in turns of readAfterWriteTurn rounds, at synchronous_commit off (the
// cluster's setting) and on. It returns a markdown section.
func readAfterWrite(ctx context.Context, on, off *target, user, password, database string, logf func(string, ...any)) (string, error) {
	var b strings.Builder
	b.WriteString(readYourWritesSectionStart + "\n## Read your writes: a read right after a write\n\n")
	fmt.Fprintf(&b, "On one connection per target, %d rounds of `UPDATE pgbench_branches SET filler = ...` then `SELECT bbalance FROM pgbench_branches WHERE bid = 1`, -M extended (pgx), interleaved in turns of %d rounds; the time of the read alone. `pgowl` runs with `routing.read_your_writes: session` (the default), `pgowl-ryw-off` with `off`.\n\n", readAfterWriteRounds, readAfterWriteTurn)
	b.WriteString("| synchronous_commit | target | read p50 | read p99 | added p50 | added p99 |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, sync := range []string{"off", "on"} {
		lat := map[string][]time.Duration{}
		conns := map[string]*pgx.Conn{}
		for _, t := range []*target{on, off} {
			u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: fmt.Sprintf("%s:%d", t.host, t.port), Path: "/" + database,
				RawQuery: url.Values{"sslmode": {"disable"}, "synchronous_commit": {sync}}.Encode()}
			cfg, err := pgx.ParseConfig(u.String())
			if err != nil {
				return "", err
			}
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				return "", fmt.Errorf("%s: %w", t.name, err)
			}
			defer conn.Close(context.Background())
			conns[t.name] = conn
		}
		for done := 0; done < readAfterWriteRounds; done += readAfterWriteTurn {
			for _, t := range []*target{on, off} {
				conn := conns[t.name]
				for i := 0; i < readAfterWriteTurn; i++ {
					if _, err := conn.Exec(ctx, "UPDATE pgbench_branches SET filler = $1 WHERE bid = 1", fmt.Sprint(done+i)); err != nil {
						return "", fmt.Errorf("%s: %w", t.name, err)
					}
					var balance int64
					start := time.Now()
					err := conn.QueryRow(ctx, "SELECT bbalance FROM pgbench_branches WHERE bid = 1").Scan(&balance)
					took := time.Since(start)
					if err != nil {
						return "", fmt.Errorf("%s: %w", t.name, err)
					}
					lat[t.name] = append(lat[t.name], took)
				}
			}
		}
		for _, t := range []*target{on, off} {
			slices.Sort(lat[t.name])
		}
		p := func(name string, q float64) time.Duration {
			l := lat[name]
			return l[min(len(l)-1, int(q*float64(len(l))))]
		}
		for _, t := range []*target{on, off} {
			added50, added99 := "", ""
			if t == on {
				added50 = fmt.Sprintf("%+.2f ms", ms(p(on.name, 0.5)-p(off.name, 0.5)))
				added99 = fmt.Sprintf("%+.2f ms", ms(p(on.name, 0.99)-p(off.name, 0.99)))
			}
			fmt.Fprintf(&b, "| %s | %s | %.2f ms | %.2f ms | %s | %s |\n", sync, t.name, ms(p(t.name, 0.5)), ms(p(t.name, 0.99)), added50, added99)
		}
		logf("read after write, synchronous_commit=%s: pgowl p50 %s p99 %s; pgowl-ryw-off p50 %s p99 %s", sync,
			p(on.name, 0.5), p(on.name, 0.99), p(off.name, 0.5), p(off.name, 0.99))
	}
	b.WriteString("\nWith read_your_writes off most reads right after a write run on a standby that has not replayed it (the stale reads the integration tests count); with it on, at synchronous_commit off the write is past the primary's flush position (the WAL writer flushes it up to 200ms later), so the read asks no standby and runs on the primary; at on it waits up to `routing.read_your_writes_wait` (20ms) for a standby.\n" + readYourWritesSectionEnd + "\n")
	return b.String(), nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// targetNamed returns the running target called name, or nil.
func targetNamed(targets []*target, name string) *target {
	for _, t := range targets {
		if t.name == name && t.skipped == "" {
			return t
		}
	}
	return nil
}
