package monitor

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/route"
)

// fakeMonitor returns a monitor over three nodes that is fed synthetic poll
// results; nothing connects anywhere.
func fakeMonitor(t *testing.T, logs *bytes.Buffer) *Monitor {
	t.Helper()
	return New(Options{
		Nodes:        []NodeAddr{{Name: "pg1", Host: "127.0.0.1", Port: 1}, {Name: "pg2", Host: "127.0.0.1", Port: 2}, {Name: "pg3", Host: "127.0.0.1", Port: 3}},
		Interval:     100 * time.Millisecond,
		DownAfter:    500 * time.Millisecond,
		QueryTimeout: 50 * time.Millisecond,
		Logger:       zerolog.New(logs),
	})
}

func primaryResult(index int, timeline uint32, lsn uint64, sentMS int) pollResult {
	return pollResult{index: index, sample: nodeSample{timeline: timeline, lsn: lsn, lsnValid: true}, sentAt: at(sentMS), doneAt: at(sentMS + 1)}
}

func standbyResult(index int, lsn uint64, sentMS int) pollResult {
	return pollResult{index: index, sample: nodeSample{inRecovery: true, timeline: 1, lsn: lsn, lsnValid: true}, sentAt: at(sentMS), doneAt: at(sentMS + 1)}
}

func failedResult(index int) pollResult {
	return pollResult{index: index, err: errTest}
}

// publishAt publishes a snapshot as of now and returns it.
func publishAt(m *Monitor, now time.Time) *route.Snapshot {
	m.publish(now)
	return m.Snapshot()
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("connection refused")

type nodeWant struct {
	up       bool
	role     route.Role
	lagKnown bool
	lagMS    int
	bytes    uint64
}

func checkNodes(t *testing.T, snap *route.Snapshot, want map[string]nodeWant) {
	t.Helper()
	for _, n := range snap.Nodes {
		w, ok := want[n.Name]
		if !ok {
			continue
		}
		got := nodeWant{up: n.Up, role: n.Role, lagKnown: n.LagKnown, lagMS: int(n.Lag.Milliseconds()), bytes: n.LagBytes}
		if got != w {
			t.Errorf("%s: got %+v, want %+v (last error %q)", n.Name, got, w, n.LastError)
		}
	}
}

// TestSnapshotAssembly drives the coordinator's bookkeeping with synthetic
// results, step by step, and checks each resulting snapshot.
func TestSnapshotAssembly(t *testing.T) {
	var logs bytes.Buffer
	m := fakeMonitor(t, &logs)

	initial := m.Snapshot()
	if initial == nil || len(initial.Nodes) != 3 {
		t.Fatalf("initial snapshot %+v", initial)
	}
	checkNodes(t, initial, map[string]nodeWant{
		"pg1": {role: route.RoleUnknown}, "pg2": {role: route.RoleUnknown}, "pg3": {role: route.RoleUnknown},
	})

	// Round 1: a primary at 1000, one standby caught up, one behind.
	m.apply(primaryResult(0, 1, 1000, 0), 1)
	m.apply(standbyResult(1, 1000, 5), 1)
	m.apply(standbyResult(2, 400, 5), 1)
	snap := publishAt(m, at(10))
	checkNodes(t, snap, map[string]nodeWant{
		"pg1": {up: true, role: route.RolePrimary, lagKnown: true},
		"pg2": {up: true, role: route.RoleStandby, lagKnown: true},
		// Only one primary sample, already beyond replay: lag is its age.
		"pg3": {up: true, role: route.RoleStandby, lagKnown: true, lagMS: 5, bytes: 600},
	})

	// Round 2: the primary idles; pg3 is still behind, so its lag grows from the first sample.
	m.apply(primaryResult(0, 1, 1000, 100), 2)
	m.apply(standbyResult(1, 1000, 105), 2)
	m.apply(standbyResult(2, 400, 105), 2)
	checkNodes(t, publishAt(m, at(110)), map[string]nodeWant{
		"pg2": {up: true, role: route.RoleStandby, lagKnown: true},
		"pg3": {up: true, role: route.RoleStandby, lagKnown: true, lagMS: 105, bytes: 600},
	})

	// Round 3: pg2's poll fails: still up (it answered within down-after) but lag unknown.
	m.apply(primaryResult(0, 1, 1000, 200), 3)
	m.apply(failedResult(1), 3)
	m.apply(standbyResult(2, 1000, 205), 3)
	snap = publishAt(m, at(210))
	checkNodes(t, snap, map[string]nodeWant{
		"pg2": {up: true, role: route.RoleStandby, lagKnown: false},
		"pg3": {up: true, role: route.RoleStandby, lagKnown: true},
	})
	if snap.Nodes[1].LastError != string(errTest) {
		t.Errorf("pg2 last error %q", snap.Nodes[1].LastError)
	}

	// Later: the primary stops answering. Past down-after it is down; its
	// last sample (sent at 200, position 1000) still bounds the standbys'
	// staleness: both have replayed 1000, so each lacks at most what was
	// written since 200, and its lag is that sample's age at its own poll.
	m.apply(failedResult(0), 4)
	m.apply(standbyResult(1, 1000, 650), 4)
	m.apply(standbyResult(2, 1000, 650), 4)
	checkNodes(t, publishAt(m, at(702)), map[string]nodeWant{
		"pg1": {up: false, role: route.RolePrimary, lagKnown: true},
		"pg2": {up: true, role: route.RoleStandby, lagKnown: true, lagMS: 450},
		"pg3": {up: true, role: route.RoleStandby, lagKnown: true, lagMS: 450},
	})
	// A standby behind the primary's last samples: lag since the oldest
	// sample beyond its position (sent at 0, position 1000), 650 bytes.
	m.apply(standbyResult(2, 350, 750), 5)
	checkNodes(t, publishAt(m, at(760)), map[string]nodeWant{
		"pg3": {up: true, role: route.RoleStandby, lagKnown: true, lagMS: 750, bytes: 650},
	})

	// pg2 is promoted (timeline 2) and pg3 follows it.
	m.apply(primaryResult(1, 2, 5000, 800), 6)
	m.apply(standbyResult(2, 5000, 805), 6)
	snap = publishAt(m, at(810))
	checkNodes(t, snap, map[string]nodeWant{
		"pg2": {up: true, role: route.RolePrimary, lagKnown: true},
		"pg3": {up: true, role: route.RoleStandby, lagKnown: true},
	})
	if snap.Nodes[1].Timeline != 2 {
		t.Errorf("pg2 timeline %d, want 2", snap.Nodes[1].Timeline)
	}

	// The old primary comes back as a primary on timeline 2 as well: split
	// brain with equal timelines, so no primary and no standby lag.
	m.apply(primaryResult(0, 2, 4000, 900), 7)
	m.apply(primaryResult(1, 2, 5000, 900), 7)
	m.apply(standbyResult(2, 5000, 905), 7)
	checkNodes(t, publishAt(m, at(910)), map[string]nodeWant{
		"pg1": {up: true, role: route.RolePrimary, lagKnown: true},
		"pg2": {up: true, role: route.RolePrimary, lagKnown: true},
		"pg3": {up: true, role: route.RoleStandby, lagKnown: false},
	})

	// Each change was logged once; nothing is logged per poll.
	for _, want := range []string{`"node is up"`, `"node is down"`, `"node role changed"`, `"standby lag is unknown"`, `"node timeline changed"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
	before := logs.Len()
	m.publish(at(911))
	m.publish(at(912))
	if logs.Len() != before {
		t.Errorf("publishing unchanged state logged:\n%s", logs.String()[before:])
	}
}

// TestHistoryResetsWhenPrimaryChanges checks that a node's samples from
// before it became primary never measure lag against it.
func TestHistoryResetsWhenPrimaryChanges(t *testing.T) {
	var logs bytes.Buffer
	m := fakeMonitor(t, &logs)
	m.apply(primaryResult(0, 1, 1000, 0), 1)
	m.apply(primaryResult(0, 1, 2000, 100), 2)
	if got := m.nodes[0].history.len(); got != 2 {
		t.Fatalf("history length %d, want 2", got)
	}
	m.apply(standbyResult(0, 2000, 200), 3)
	if got := m.nodes[0].history.len(); got != 0 {
		t.Fatalf("history length after demotion %d, want 0", got)
	}
	m.apply(primaryResult(0, 2, 3000, 300), 4)
	m.apply(primaryResult(0, 2, 2500, 400), 5) // WAL went backwards: a different server
	if got := m.nodes[0].history.len(); got != 1 || m.nodes[0].history.at(0).lsn != 2500 {
		t.Fatalf("history after WAL went backwards: len %d", got)
	}
}

func TestOptionsDefaults(t *testing.T) {
	got := Options{Nodes: []NodeAddr{{Name: "pg1"}}}.withDefaults()
	if got.Interval != time.Second || got.QueryTimeout != time.Second || got.DialTimeout != time.Second ||
		got.DownAfter != 4*time.Second || got.Database != "postgres" || got.HistorySize != 121 {
		t.Errorf("defaults: %+v", got)
	}
	if got.Nodes[0].Host != "localhost" || got.Nodes[0].Port != 5432 {
		t.Errorf("node defaults: %+v", got.Nodes[0])
	}
	fast := Options{Interval: 100 * time.Millisecond, HistorySize: 3}.withDefaults()
	if fast.QueryTimeout != 100*time.Millisecond || fast.HistorySize != minHistorySize {
		t.Errorf("fast defaults: %+v", fast)
	}
	slow := Options{Interval: time.Minute}.withDefaults()
	if slow.QueryTimeout != 5*time.Second {
		t.Errorf("query timeout for a 1m interval: %s", slow.QueryTimeout)
	}
}

func TestConnStringQuoting(t *testing.T) {
	node := NodeAddr{Name: "pg1", Host: "db.example", Port: 6543}
	opts := Options{User: "o'neil", Password: `p a\ss'word`, Database: "my db"}.withDefaults()
	p, err := newPoller(0, node, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.configure()
	if err != nil {
		t.Fatal(err)
	}
	if c.Host != "db.example" || c.Port != 6543 || c.User != "o'neil" || c.Password != `p a\ss'word` || c.Database != "my db" {
		t.Errorf("parsed config: host %q port %d user %q password %q database %q", c.Host, c.Port, c.User, c.Password, c.Database)
	}
	if c.RuntimeParams["application_name"] != applicationName {
		t.Errorf("application_name %q", c.RuntimeParams["application_name"])
	}
}

// TestStoppedPrimaryBoundsLagOnlyOnItsTimeline checks when the samples of a
// primary that stopped answering still bound the standbys' lag: not once a
// node reports a newer timeline (it follows a promoted node, whose WAL forked
// from the old primary's), and not when that primary was never sampled.
func TestStoppedPrimaryBoundsLagOnlyOnItsTimeline(t *testing.T) {
	var logs bytes.Buffer
	m := fakeMonitor(t, &logs)
	m.apply(primaryResult(0, 1, 1000, 0), 1)
	m.apply(standbyResult(1, 1000, 5), 1)
	m.apply(standbyResult(2, 1000, 5), 1)
	m.apply(failedResult(0), 2)
	m.apply(standbyResult(1, 1200, 600), 2)
	m.apply(standbyResult(2, 1000, 600), 2)
	snap := publishAt(m, at(610))
	if p := snap.Nodes[0]; p.Up {
		t.Fatalf("pg1 should be down 610ms after its last answer: %+v", p)
	}
	checkNodes(t, snap, map[string]nodeWant{
		"pg2": {up: true, role: route.RoleStandby, lagKnown: true, lagMS: 600},
		"pg3": {up: true, role: route.RoleStandby, lagKnown: true, lagMS: 600},
	})

	// pg2 is promoted: until the monitor sees it as primary it is a standby
	// on timeline 2, and pg3's position says nothing about what it lacks.
	promoted := standbyResult(1, 1300, 700)
	promoted.sample.timeline = 2
	m.apply(promoted, 3)
	m.apply(standbyResult(2, 1000, 700), 3)
	snap = publishAt(m, at(710))
	checkNodes(t, snap, map[string]nodeWant{
		"pg3": {up: true, role: route.RoleStandby, lagKnown: false},
	})
	if why := snap.Nodes[2].LagUnknownReason; why != "no primary" {
		t.Errorf("pg3's lag is unknown because %q, want %q", why, "no primary")
	}
}

// TestStandbyAheadOfNewPrimaryIsNotReadable: pg3 replayed the old
// primary's WAL past the point where pg2, promoted, forked off. Its position
// is beyond pg2's, which would make it look caught up (lag 0) although it
// holds rows pg2 never had and can never follow pg2. While pg2 is new (few
// samples), a standby ahead of it is not trusted; once a pg2 sample
// taken after pg3's answer is behind pg3, pg3's lag is unknown, and it stays
// so until pg3 reports a newer timeline, also after pg2's writes pass its
// position and while pg3 goes on replaying another primary's WAL.
func TestStandbyAheadOfNewPrimaryIsNotReadable(t *testing.T) {
	var logs bytes.Buffer
	m := fakeMonitor(t, &logs)
	// pg1 stopped long ago; pg2, a standby, is promoted; pg3 is ahead of it.
	feed(m, standbyResult(1, 4900, -100), 0)
	feed(m, primaryResult(1, 2, 5000, 0), 1)
	feed(m, standbyResult(2, 9000, 10), 1)
	snap := publishAt(m, at(20))
	// pg2 was just promoted: a standby ahead of it waits for proof either way.
	checkNodes(t, snap, map[string]nodeWant{"pg3": {up: true, role: route.RoleStandby, lagKnown: false}})
	if reason := snap.Nodes[2].LagUnknownReason; !strings.Contains(reason, "primary is new") {
		t.Errorf("pg3's lag unknown because %q, want a reason naming the new primary", reason)
	}
	// The next round: pg2 is still behind what pg3 reported before it.
	feed(m, primaryResult(1, 2, 5100, 100), 2)
	feed(m, standbyResult(2, 9000, 110), 2)
	snap = publishAt(m, at(120))
	checkNodes(t, snap, map[string]nodeWant{"pg3": {up: true, role: route.RoleStandby, lagKnown: false}})
	if reason := snap.Nodes[2].LagUnknownReason; !strings.Contains(reason, "diverged") {
		t.Errorf("pg3's lag unknown because %q, want a reason naming the divergence", reason)
	}
	// pg2 writes past pg3's position; pg3 has not moved: still not readable.
	feed(m, primaryResult(1, 2, 12000, 200), 3)
	feed(m, standbyResult(2, 9000, 210), 3)
	snap = publishAt(m, at(220))
	checkNodes(t, snap, map[string]nodeWant{"pg3": {up: true, role: route.RoleStandby, lagKnown: false}})
	// It goes on replaying (an old primary still up): still not readable.
	feed(m, primaryResult(1, 2, 12000, 300), 4)
	feed(m, standbyResult(2, 9500, 310), 4)
	snap = publishAt(m, at(320))
	checkNodes(t, snap, map[string]nodeWant{"pg3": {up: true, role: route.RoleStandby, lagKnown: false}})
	// Rewound or cloned from pg2, it reports pg2's timeline: measured again.
	feed(m, primaryResult(1, 2, 12000, 400), 5)
	rebuilt := standbyResult(2, 12000, 410)
	rebuilt.sample.timeline = 2
	feed(m, rebuilt, 5)
	snap = publishAt(m, at(420))
	checkNodes(t, snap, map[string]nodeWant{"pg3": {up: true, role: route.RoleStandby, lagKnown: true}})
}

// TestStandbyAheadOfAnEarlierPrimarySampleIsNotDiverged: a standby sampled
// after the primary may have replayed WAL written since the primary's
// sample; that is not divergence.
func TestStandbyAheadOfAnEarlierPrimarySampleIsNotDiverged(t *testing.T) {
	var logs bytes.Buffer
	m := fakeMonitor(t, &logs)
	feed(m, primaryResult(0, 1, 1000, 0), 1)
	feed(m, standbyResult(1, 1500, 10), 1)
	feed(m, primaryResult(0, 1, 2000, 100), 2)
	snap := publishAt(m, at(105))
	checkNodes(t, snap, map[string]nodeWant{"pg2": {up: true, role: route.RoleStandby, lagKnown: true}})
}

// feed applies a poll result and publishes, as the coordinator does for
// every result that arrives.
func feed(m *Monitor, r pollResult, round uint64) {
	m.apply(r, round)
	m.publish(r.doneAt)
}

// TestStandbyAheadOfAPrimarySeenAtStartIsMeasured: a primary that was one
// when the monitor started is not new: a standby ahead of its last sample
// (it replayed the shutdown checkpoint of a primary that just stopped) is
// measured as usual, so reads go on while the primary's last sample bounds
// the standby's staleness.
func TestStandbyAheadOfAPrimarySeenAtStartIsMeasured(t *testing.T) {
	var logs bytes.Buffer
	m := fakeMonitor(t, &logs)
	feed(m, primaryResult(0, 1, 5000, 0), 1)
	feed(m, standbyResult(1, 5100, 10), 1)
	snap := publishAt(m, at(20))
	checkNodes(t, snap, map[string]nodeWant{"pg2": {up: true, role: route.RoleStandby, lagKnown: true}})
}
