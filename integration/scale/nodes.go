package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/internal/cluster"
)

// createAccounts creates and fills the load test's table on the primary, lets user app read
// and update it, and waits until the standbys have replayed it.
func createAccounts(ctx context.Context, cl *cluster.Cluster, rows int) error {
	primary := cl.Nodes[0]
	logf("creating accounts (%d rows) on %s", rows, primary.Name)
	sql := fmt.Sprintf(`DROP TABLE IF EXISTS accounts;
CREATE TABLE accounts (aid integer PRIMARY KEY, abalance integer NOT NULL DEFAULT 0, filler char(84) NOT NULL DEFAULT '');
INSERT INTO accounts (aid) SELECT g FROM generate_series(1, %d) AS g;
GRANT SELECT, UPDATE ON accounts TO %s;
ANALYZE accounts;`, rows, appUser)
	if err := primary.Exec(ctx, sql); err != nil {
		return err
	}
	for _, standby := range cl.Nodes[1:] {
		if err := standby.WaitCaughtUp(ctx, primary); err != nil {
			return err
		}
	}
	return nil
}

// nodeCount is one node's backends at one moment.
type nodeCount struct {
	app       int // backends of user app: pgowl's pool
	appActive int // of those, the ones not idle
	clients   int // every client backend, the monitor's and this sampler's included
}

// nodeCounter keeps one superuser connection per node for counting backends.
type nodeCounter struct {
	nodes []*cluster.Node
	conns []*pgx.Conn
}

// countSQL counts user app's backends, the busy ones, and every client backend.
const countSQL = `SELECT count(*) FILTER (WHERE usename = '` + appUser + `'),
       count(*) FILTER (WHERE usename = '` + appUser + `' AND state IS DISTINCT FROM 'idle'),
       count(*) FILTER (WHERE backend_type = 'client backend')
FROM pg_stat_activity`

// newNodeCounter connects to every node as the superuser.
func newNodeCounter(ctx context.Context, cl *cluster.Cluster) (*nodeCounter, error) {
	nc := &nodeCounter{nodes: cl.Nodes}
	for _, n := range cl.Nodes {
		conn, err := n.Connect(ctx)
		if err != nil {
			nc.close()
			return nil, err
		}
		nc.conns = append(nc.conns, conn)
	}
	return nc, nil
}

// count returns every node's backends, in node order.
func (nc *nodeCounter) count(ctx context.Context) ([]nodeCount, error) {
	counts, _, err := nc.countTimed(ctx)
	return counts, err
}

// countTimed returns every node's backends and how long each node took to answer.
func (nc *nodeCounter) countTimed(ctx context.Context) ([]nodeCount, []time.Duration, error) {
	counts := make([]nodeCount, len(nc.conns))
	took := make([]time.Duration, len(nc.conns))
	for i, conn := range nc.conns {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := time.Now()
		err := conn.QueryRow(qctx, countSQL).Scan(&counts[i].app, &counts[i].appActive, &counts[i].clients)
		took[i] = time.Since(t0)
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("count backends on %s: %w", nc.nodes[i].Name, err)
		}
	}
	return counts, took, nil
}

// close closes the superuser connections.
func (nc *nodeCounter) close() {
	for _, conn := range nc.conns {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = conn.Close(ctx)
		cancel()
	}
	nc.conns = nil
}

// logSummary counts a log's lines by kind and keeps an example of each.
type logSummary struct {
	lines    int
	kinds    []logKind // most frequent first
	problems string    // why the log could not be read, if it could not
}

type logKind struct {
	key     string
	count   int
	example string
}

// addLine counts line under key, keeping the first example.
func (s *logSummary) add(byKey map[string]*logKind, key, line string) {
	s.lines++
	k := byKey[key]
	if k == nil {
		if len(line) > 600 {
			line = line[:600] + " ..."
		}
		k = &logKind{key: key, example: line}
		byKey[key] = k
	}
	k.count++
}

// finish orders the kinds, most frequent first.
func (s *logSummary) finish(byKey map[string]*logKind) {
	for _, k := range byKey {
		s.kinds = append(s.kinds, *k)
	}
	sort.Slice(s.kinds, func(i, j int) bool {
		if s.kinds[i].count != s.kinds[j].count {
			return s.kinds[i].count > s.kinds[j].count
		}
		return s.kinds[i].key < s.kinds[j].key
	})
}

// summarizeNodeLogs counts each node's ERROR, FATAL and PANIC lines (the cluster logs warnings
// and up), by message with its numbers blanked.
func summarizeNodeLogs(cl *cluster.Cluster) map[string]logSummary {
	out := map[string]logSummary{}
	for _, n := range cl.Nodes {
		var s logSummary
		content, err := os.ReadFile(n.LogPath())
		if err != nil {
			s.problems = err.Error()
			out[n.Name] = s
			continue
		}
		byKey := map[string]*logKind{}
		for _, line := range strings.Split(string(content), "\n") {
			for _, level := range []string{"ERROR:", "FATAL:", "PANIC:"} {
				if i := strings.Index(line, level); i >= 0 {
					s.add(byKey, blankDigits(line[i:]), line)
					break
				}
			}
		}
		s.finish(byKey)
		out[n.Name] = s
	}
	return out
}

// blankDigits replaces runs of digits with "N", so that messages differing in numbers group.
func blankDigits(text string) string {
	var b strings.Builder
	inDigits := false
	for _, r := range text {
		if r >= '0' && r <= '9' {
			if !inDigits {
				b.WriteByte('N')
			}
			inDigits = true
			continue
		}
		inDigits = false
		b.WriteRune(r)
	}
	return b.String()
}
