package monitor

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

// The files under testdata/patroni are GET /cluster answers recorded from a real Patroni 3.0.2
// (Debian) with three members on loopback, before, during and after `patronictl switchover
// --leader m1 --candidate m2`, and while paused. The members' connect addresses:
const (
	recordedM1 = "127.0.0.1:47987"
	recordedM2 = "127.0.0.1:50669"
	recordedM3 = "127.0.0.1:35441"
)

func readRecorded(t *testing.T, name string) []byte {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "patroni", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestPatroniClusterParsesRecordedAnswers reads each recorded answer: members, roles, states,
// timelines, and lag as bytes or "unknown".
func TestPatroniClusterParsesRecordedAnswers(t *testing.T) {
	tests := []struct {
		file      string
		leader    string // "" when Patroni names none
		pause     bool
		check     string // a member whose fields are checked below
		role      string
		state     string
		timeline  uint32
		lagKnown  bool
		lagBytes  uint64
		addresses []string
	}{
		{file: "steady", leader: "m1", check: "m2", role: "replica", state: "running", timeline: 1, lagKnown: true},
		{file: "switchover_old_leader_demoted", leader: "", check: "m1", role: "replica", state: "stopping", timeline: 0, lagKnown: false},
		{file: "switchover_new_leader_named", leader: "m2", check: "m1", role: "replica", state: "stopping", lagKnown: false},
		{file: "switchover_replica_lag_bytes", leader: "m2", check: "m3", role: "replica", state: "running", timeline: 1, lagKnown: true, lagBytes: 280},
		{file: "switchover_old_leader_rejoining", leader: "m2", check: "m1", role: "replica", state: "starting", lagKnown: false},
		{file: "paused", leader: "m2", pause: true, check: "m3", role: "replica", state: "running", timeline: 2, lagKnown: true},
	}
	for _, test := range tests {
		t.Run(test.file, func(t *testing.T) {
			c, err := parsePatroniCluster(readRecorded(t, test.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Members) != 3 {
				t.Fatalf("%d members, want 3", len(c.Members))
			}
			for _, addr := range []string{recordedM1, recordedM2, recordedM3} {
				if _, ok := c.member(addr); !ok {
					t.Errorf("no member at %s", addr)
				}
			}
			leader, ok := c.leader()
			if got := map[bool]string{true: leader.Name}[ok]; got != test.leader {
				t.Errorf("leader %q, want %q", got, test.leader)
			}
			if c.Pause != test.pause {
				t.Errorf("pause %v, want %v", c.Pause, test.pause)
			}
			var m patroniMember
			for _, candidate := range c.Members {
				if candidate.Name == test.check {
					m = candidate
				}
			}
			if m.Role != test.role || m.State != test.state || m.Timeline != test.timeline ||
				m.Lag.Known != test.lagKnown || m.Lag.Bytes != test.lagBytes {
				t.Errorf("member %s = %+v, want role %s state %s timeline %d lag known %v bytes %d",
					test.check, m, test.role, test.state, test.timeline, test.lagKnown, test.lagBytes)
			}
		})
	}
}

// TestPatroniClusterRefusesMalformedAnswers checks the answers parsePatroniCluster must not
// believe: not JSON, no members, a member without an address, two leaders.
func TestPatroniClusterRefusesMalformedAnswers(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":            `<html>`,
		"no members":          `{"scope": "owl"}`,
		"member without port": `{"members": [{"name": "m1", "role": "leader", "host": "127.0.0.1"}]}`,
		"two leaders":         `{"members": [{"name": "m1", "role": "leader", "host": "a", "port": 1}, {"name": "m2", "role": "leader", "host": "b", "port": 1}]}`,
		"lag not a number":    `{"members": [{"name": "m1", "role": "replica", "host": "a", "port": 1, "lag": 1.5e400}]}`,
	} {
		if _, err := parsePatroniCluster([]byte(body)); err == nil {
			t.Errorf("%s: parsed %s", name, body)
		}
	}
}

// patroniMonitor returns a Monitor (not running) over the recorded members plus one node Patroni
// does not know, following the recorded answer file as if it had just been read.
func patroniMonitor(t *testing.T, file string) *Monitor {
	t.Helper()
	var nodes []NodeAddr
	for i, addr := range []string{recordedM1, recordedM2, recordedM3, "127.0.0.1:1"} {
		host, port, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(port)
		nodes = append(nodes, NodeAddr{Name: []string{"m1", "m2", "m3", "stray"}[i], Host: host, Port: n})
	}
	m := New(Options{Nodes: nodes, PatroniURLs: []string{"http://127.0.0.1:8008"}, Interval: 100 * time.Millisecond, DownAfter: time.Second})
	c, err := parsePatroniCluster(readRecorded(t, file))
	if err != nil {
		t.Fatal(err)
	}
	m.applyPatroniResult(patroniResult{cluster: c, at: time.Now()})
	return m
}

// snapshotClaiming returns a snapshot of the four nodes of patroniMonitor, all up, with roles
// as the nodes themselves report them.
func snapshotClaiming(roles ...route.Role) *route.Snapshot {
	snap := &route.Snapshot{TakenAt: time.Now()}
	for i, addr := range []string{recordedM1, recordedM2, recordedM3, "127.0.0.1:1"} {
		snap.Nodes = append(snap.Nodes, route.NodeState{Name: []string{"m1", "m2", "m3", "stray"}[i], Addr: addr, Up: true, Role: roles[i], SampledAt: time.Now()})
	}
	return snap
}

// TestPatroniDecidesWhoMayBePrimary applies recorded answers to what the nodes say: a node that
// says primary while Patroni names another leader, or none, gets nothing; a node Patroni does
// not list gets nothing; the leader and the replicas are left as the nodes report them.
func TestPatroniDecidesWhoMayBePrimary(t *testing.T) {
	const p, s = route.RolePrimary, route.RoleStandby
	tests := []struct {
		name     string
		file     string
		roles    []route.Role
		excluded map[string]string // node -> a part of its Excluded reason
	}{
		{"steady", "steady", []route.Role{p, s, s, s}, map[string]string{"stray": "does not list"}},
		{"old leader still primary, no leader named", "switchover_old_leader_demoted", []route.Role{p, s, s, s},
			map[string]string{"m1": "names no leader", "stray": "does not list"}},
		{"new leader named, old one still answers as primary", "switchover_new_leader_named", []route.Role{p, p, s, s},
			map[string]string{"m1": "Patroni says replica and names m2 leader", "stray": "does not list"}},
		{"new leader named, not promoted yet", "switchover_new_leader_named", []route.Role{s, s, s, s},
			map[string]string{"stray": "does not list"}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			m := patroniMonitor(t, test.file)
			snap := snapshotClaiming(test.roles...)
			m.applyPatroni(snap, time.Now())
			if snap.Topology != route.TopologyPatroni {
				t.Fatalf("topology %s, want patroni", snap.Topology)
			}
			for _, n := range snap.Nodes {
				want, excluded := test.excluded[n.Name]
				switch {
				case excluded && (!strings.Contains(n.Excluded, want) || n.Up):
					t.Errorf("%s: excluded %q, up %v; want a reason with %q and down", n.Name, n.Excluded, n.Up, want)
				case !excluded && (n.Excluded != "" || !n.Up):
					t.Errorf("%s: excluded %q, up %v; want it left alone", n.Name, n.Excluded, n.Up)
				}
			}
			if test.roles[1] == p && test.file == "switchover_new_leader_named" {
				i, err := route.Primary(snap, route.Policy{DownAfter: time.Second}, time.Now())
				if err != nil || snap.Nodes[i].Name != "m2" {
					t.Errorf("route.Primary = %d, %v; want m2, the leader Patroni names", i, err)
				}
			}
		})
	}
}

// TestPatroniUnreachableFallsBack checks that an answer older than down_after, or none, leaves
// the roles to the nodes and says so in the snapshot.
func TestPatroniUnreachableFallsBack(t *testing.T) {
	m := patroniMonitor(t, "switchover_new_leader_named")
	m.applyPatroniResult(patroniResult{err: context.DeadlineExceeded, at: time.Now()})
	snap := snapshotClaiming(route.RolePrimary, route.RoleStandby, route.RoleStandby, route.RoleStandby)
	m.applyPatroni(snap, time.Now().Add(2*time.Second))
	if snap.Topology != route.TopologyPatroniUnreachable || !strings.Contains(snap.TopologyError, "deadline") {
		t.Fatalf("topology %s (%q), want patroni_unreachable with the error", snap.Topology, snap.TopologyError)
	}
	for _, n := range snap.Nodes {
		if n.Excluded != "" || !n.Up {
			t.Errorf("%s excluded (%q) while Patroni is unreachable", n.Name, n.Excluded)
		}
	}
}

// TestPatroniReaderTriesEachURL serves a recorded answer on one URL behind one that refuses
// connections and one that answers 503: the reader uses the one that answers; with none, it
// reports every URL's error.
func TestPatroniReaderTriesEachURL(t *testing.T) {
	body := readRecorded(t, "steady")
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cluster" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	defer good.Close()
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer unavailable.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	r := newPatroniReader([]string{closedURL, unavailable.URL, good.URL}, PatroniTLS{}, time.Second)
	res := r.read(context.Background())
	if res.err != nil || res.url != good.URL {
		t.Fatalf("read from %q: %v; want %s", res.url, res.err, good.URL)
	}
	if leader, _ := res.cluster.leader(); leader.Name != "m1" {
		t.Errorf("leader %q, want m1", leader.Name)
	}
	r.urls = r.urls[:2]
	res = r.read(context.Background())
	if res.err == nil || !strings.Contains(res.err.Error(), "status 503") || !strings.Contains(res.err.Error(), closedURL) {
		t.Fatalf("with no URL answering: %v; want both URLs' errors", res.err)
	}
}

// TestPatroniReaderLetsTheSlowerReadsFinish holds that the reads still in flight when one URL
// answers are not cancelled. A cancel can close a keep-alive connection net/http has just put
// back in its idle pool, under the next read that takes it: that read then failed with
// "context canceled" although its URL answered (TestPatroniReaderTriesEachURL, once in CI).
func TestPatroniReaderLetsTheSlowerReadsFinish(t *testing.T) {
	body := readRecorded(t, "steady")
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write(body)
	}))
	defer good.Close()
	slowerEnded := make(chan string, 1)
	slower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(200 * time.Millisecond):
			w.WriteHeader(http.StatusServiceUnavailable)
			slowerEnded <- "answered"
		case <-r.Context().Done():
			slowerEnded <- "cancelled by the reader"
		}
	}))
	defer slower.Close()

	r := newPatroniReader([]string{slower.URL, good.URL}, PatroniTLS{}, 5*time.Second)
	if res := r.read(context.Background()); res.err != nil || res.url != good.URL {
		t.Fatalf("read from %q: %v; want %s", res.url, res.err, good.URL)
	}
	select {
	case how := <-slowerEnded:
		if how != "answered" {
			t.Fatalf("the slower read was %s; want it left to finish", how)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the slower read did not end")
	}
}
