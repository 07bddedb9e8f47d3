package monitor

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/pgowl/pgowl/route"
)

// Patroni as a topology source: when Options.PatroniURLs is set, the
// monitor also reads Patroni's REST API (GET /cluster) each interval. The
// leader Patroni names is the only node that may be the primary, a node
// Patroni does not list is unavailable, and a node that says it is a
// primary while Patroni calls it something else gets nothing (a
// disagreement, logged and shown in the snapshot). The monitor still polls
// every node itself: roles, timelines and WAL positions for lag come from
// the nodes. When no URL answers, the monitor falls back to its own polling
// alone and says so in the snapshot (route.TopologyPatroniUnreachable).

// patroniMember is one member in Patroni's GET /cluster answer.
type patroniMember struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	State    string `json:"state"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Timeline uint32 `json:"timeline"`
	// Lag is the replica's lag in bytes; Patroni writes "unknown" (a string) when it has none.
	Lag patroniLag `json:"lag"`
}

// patroniLag is a member's lag: bytes, or unknown.
type patroniLag struct {
	Bytes uint64
	Known bool
}

// UnmarshalJSON reads a number of bytes, or a string such as "unknown".
func (l *patroniLag) UnmarshalJSON(data []byte) error {
	var n json.Number
	if err := json.Unmarshal(data, &n); err == nil {
		bytes, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil {
			return fmt.Errorf("lag %s: %w", n, err)
		}
		*l = patroniLag{Bytes: bytes, Known: true}
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("lag %s is neither a number nor a string", data)
	}
	*l = patroniLag{}
	return nil
}

// patroniCluster is Patroni's GET /cluster answer.
type patroniCluster struct {
	Members []patroniMember `json:"members"`
	// Pause is true while Patroni's automatic failover is paused (patronictl pause).
	Pause bool `json:"pause"`
}

// Patroni roles: "leader" (the primary), "standby_leader" (the head of a standby cluster),
// "replica", "sync_standby" (a synchronous replica).
const patroniLeader = "leader"

// parsePatroniCluster decodes a GET /cluster body.
func parsePatroniCluster(body []byte) (patroniCluster, error) {
	var c patroniCluster
	if err := json.Unmarshal(body, &c); err != nil {
		return patroniCluster{}, fmt.Errorf("patroni /cluster: %w", err)
	}
	if c.Members == nil {
		return patroniCluster{}, errors.New("patroni /cluster: no members list")
	}
	leaders := 0
	for _, m := range c.Members {
		if m.Name == "" || m.Host == "" || m.Port <= 0 {
			return patroniCluster{}, fmt.Errorf("patroni /cluster: member %q without name, host or port", m.Name)
		}
		if m.Role == patroniLeader {
			leaders++
		}
	}
	if leaders > 1 {
		return patroniCluster{}, fmt.Errorf("patroni /cluster: %d members are leader", leaders)
	}
	return c, nil
}

// member returns the member at host:port (Patroni's connect address), or false.
func (c *patroniCluster) member(hostPort string) (patroniMember, bool) {
	for _, m := range c.Members {
		if net.JoinHostPort(m.Host, strconv.Itoa(m.Port)) == hostPort {
			return m, true
		}
	}
	return patroniMember{}, false
}

// leader returns the member Patroni names leader, or false when there is none (an election).
func (c *patroniCluster) leader() (patroniMember, bool) {
	for _, m := range c.Members {
		if m.Role == patroniLeader {
			return m, true
		}
	}
	return patroniMember{}, false
}

// patroniResult is one read of GET /cluster: the cluster, or why no URL answered.
type patroniResult struct {
	cluster patroniCluster
	url     string
	err     error
	at      time.Time
	// warning, when set, is logged: the TLS files failed to load and an older client was used.
	warning string
}

// patroniReader reads GET /cluster from its URLs, all at once, and takes the first valid
// answer: a member that does not answer (the old leader's host, gone in a failover) must not
// delay the answer of the others by monitor.query_timeout at every read, when the answer matters
// most. Every member answers /cluster from the same DCS, so any valid answer will do.
type patroniReader struct {
	urls    []string
	tls     PatroniTLS
	timeout time.Duration
	// loadErr is why the TLS files last failed to load while an older client went on; "" once
	// they load.
	loadErr string
	// client is the last client built, for the TLS files as read then (pem).
	client *http.Client
	pem    [3][]byte
}

func newPatroniReader(urls []string, tls PatroniTLS, timeout time.Duration) *patroniReader {
	return &patroniReader{urls: urls, tls: tls, timeout: timeout}
}

// read asks every URL at once and returns the first valid answer, or every URL's error.
func (r *patroniReader) read(ctx context.Context) patroniResult {
	client, err := r.currentClient()
	if err != nil && r.client == nil {
		return patroniResult{err: fmt.Errorf("topology.patroni: %w", err), at: time.Now()}
	}
	warning := ""
	if err != nil {
		// Files being renewed one at a time (a certificate before its key) do not match for a
		// moment: the client built from the last files that did goes on meanwhile, and the
		// monitor logs why (once per cause), so that files left broken do not go unnoticed.
		client, warning = r.client, "topology.patroni: "+err.Error()+"; the last certificates that loaded are used"
	}
	newWarning := warning != "" && warning != r.loadErr
	r.loadErr = warning
	// The reads still in flight when one answers are left to finish, each within the client's
	// timeout, rather than cancelled: net/http puts a connection whose answer had no body back
	// in its idle pool a moment before it hands the answer over, and a cancel that falls in
	// that moment closes the connection under whichever read takes it next, which then fails
	// with "context canceled" (seen in CI). Only ctx, the monitor's, ends them early.
	type answer struct {
		index   int
		cluster patroniCluster
		err     error
	}
	answers := make(chan answer, len(r.urls))
	for i, base := range r.urls {
		go func() {
			c, err := readPatroniCluster(ctx, client, base)
			answers <- answer{index: i, cluster: c, err: err}
		}()
	}
	errs := make([]error, len(r.urls))
	for range r.urls {
		a := <-answers
		if a.err == nil {
			res := patroniResult{cluster: a.cluster, url: r.urls[a.index], at: time.Now()}
			if newWarning {
				res.warning = warning
			}
			return res
		}
		errs[a.index] = fmt.Errorf("%s: %w", r.urls[a.index], a.err)
	}
	res := patroniResult{err: errors.Join(errs...), at: time.Now()}
	if newWarning {
		res.warning = warning
	}
	return res
}

// currentClient returns the HTTP client for the TLS files as they are now: the last one while
// the files are unchanged (its connections are kept alive between reads), a new one when one
// was renewed.
func (r *patroniReader) currentClient() (*http.Client, error) {
	var pem [3][]byte
	for i, path := range []string{r.tls.CAFile, r.tls.CertFile, r.tls.KeyFile} {
		if path == "" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		pem[i] = data
	}
	if r.client != nil && bytes.Equal(pem[0], r.pem[0]) && bytes.Equal(pem[1], r.pem[1]) && bytes.Equal(pem[2], r.pem[2]) {
		return r.client, nil
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if pem[0] != nil {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem[0]) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", r.tls.CAFile)
		}
		tlsConfig.RootCAs = roots
	}
	if pem[1] != nil || pem[2] != nil {
		pair, err := tls.X509KeyPair(pem[1], pem[2])
		if err != nil {
			return nil, fmt.Errorf("cert_file and key_file: %w", err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	if r.client != nil {
		r.client.CloseIdleConnections()
	}
	r.client, r.pem = &http.Client{Timeout: r.timeout, Transport: transport}, pem
	return r.client, nil
}

// readPatroniCluster reads and parses GET base/cluster.
func readPatroniCluster(ctx context.Context, client *http.Client, base string) (patroniCluster, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/cluster", nil)
	if err != nil {
		return patroniCluster{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return patroniCluster{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return patroniCluster{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return patroniCluster{}, fmt.Errorf("status %d", resp.StatusCode)
	}
	return parsePatroniCluster(body)
}

// runPatroni reads /cluster every interval until ctx ends and sends each result.
func (m *Monitor) runPatroni(ctx context.Context, out chan<- patroniResult) {
	r := newPatroniReader(m.opts.PatroniURLs, m.opts.PatroniTLS, m.opts.QueryTimeout)
	defer func() {
		if r.client != nil {
			r.client.CloseIdleConnections()
		}
	}()
	ticker := time.NewTicker(m.opts.Interval)
	defer ticker.Stop()
	for {
		res := r.read(ctx)
		select {
		case out <- res:
		case <-ctx.Done():
			return
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
	}
}

// applyPatroniResult keeps a successful read of /cluster, or why it failed.
func (m *Monitor) applyPatroniResult(r patroniResult) {
	if r.warning != "" {
		m.log.Warn().Msg(r.warning)
	}
	if r.err != nil {
		m.patroniErr = r.err.Error()
		return
	}
	m.patroni, m.patroniAt, m.patroniErr = r.cluster, r.at, ""
	m.memoryMu.Lock()
	m.patroniHandover = handedOverPatroni{cluster: r.cluster, at: r.at}
	m.memoryMu.Unlock()
}

// applyPatroni sets the snapshot's topology source and, while Patroni's last
// answer is younger than DownAfter, excludes the nodes Patroni does not list
// and the nodes that say they are a primary while Patroni does not name them
// leader: they are marked down with the reason in Excluded.
func (m *Monitor) applyPatroni(snap *route.Snapshot, now time.Time) {
	if len(m.opts.PatroniURLs) == 0 {
		return
	}
	if m.patroniAt.IsZero() || now.Sub(m.patroniAt) > m.opts.DownAfter {
		snap.Topology = route.TopologyPatroniUnreachable
		snap.TopologyError = m.patroniErr
		if snap.TopologyError == "" {
			snap.TopologyError = "no answer from Patroni yet"
		}
		return
	}
	snap.Topology = route.TopologyPatroni
	leader, hasLeader := m.patroni.leader()
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		member, listed := m.patroni.member(n.Addr)
		switch {
		case !listed:
			n.Excluded = "Patroni does not list this node (no member at " + n.Addr + ")"
		case n.Role == route.RolePrimary && member.Role != patroniLeader && hasLeader:
			n.Excluded = "the node says it is a primary, Patroni says " + member.Role + " and names " + leader.Name + " leader"
		case n.Role == route.RolePrimary && member.Role != patroniLeader:
			n.Excluded = "the node says it is a primary, Patroni says " + member.Role + " and names no leader"
		}
		if n.Excluded != "" {
			n.Up = false
		}
	}
}

// logTopology logs each change of the topology source's verdicts: Patroni
// reachable or not, and each node excluded or readmitted.
func (m *Monitor) logTopology(snap *route.Snapshot) {
	if len(m.opts.PatroniURLs) == 0 {
		return
	}
	state := snap.Topology.String()
	for _, n := range snap.Nodes {
		if n.Excluded != "" {
			state += "|" + n.Name + ":" + n.Excluded
		}
	}
	if state == m.patroniLogged {
		return
	}
	m.patroniLogged = state
	switch snap.Topology {
	case route.TopologyPatroniUnreachable:
		m.log.Warn().Str("topology", snap.Topology.String()).Str("error", snap.TopologyError).
			Msg("Patroni cannot be reached: roles come from pgowl's own polling alone")
	default:
		leader, _ := m.patroni.leader()
		m.log.Info().Str("topology", snap.Topology.String()).Str("patroni_leader", leader.Name).Msg("roles follow Patroni")
	}
	for _, n := range snap.Nodes {
		if n.Excluded != "" {
			m.log.Warn().Str("node", n.Name).Str("excluded", n.Excluded).Msg("Patroni and the node disagree, or Patroni does not list it: sending it nothing")
		}
	}
}
