package monitor

import (
	"bytes"
	"testing"
)

// TestMemoryRecordsPrimaryTimelinesAndDivergence feeds synthetic results and
// checks what Memory reports: each node's highest primary timeline, and a
// standby marked diverged from a primary.
func TestMemoryRecordsPrimaryTimelinesAndDivergence(t *testing.T) {
	var logs bytes.Buffer
	m := fakeMonitor(t, &logs)
	if got := m.Memory(); len(got) != 0 {
		t.Fatalf("a new monitor remembers %v, want nothing", got)
	}
	m.apply(primaryResult(0, 1, 1000, 0), 1)
	m.apply(standbyResult(2, 5000, 10), 1) // pg3 replayed past what pg2 will insert
	m.apply(primaryResult(1, 2, 2000, 20), 1)
	got := m.Memory()
	want := map[string]NodeMemory{
		"pg1": {PrimaryTimeline: 1},
		"pg2": {PrimaryTimeline: 2},
		"pg3": {DivergedFrom: "pg2", DivergedTimeline: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("Memory() = %v, want %v", got, want)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("Memory()[%s] = %+v, want %+v", name, got[name], w)
		}
	}
}

// TestInheritSeedsTheStalePrimaryTimelineAndDivergence gives a fresh monitor
// facts an earlier one learned: its first snapshot already knows the newest
// primary timeline, a name it does not poll is ignored, and a divergence
// from a primary it does not poll is dropped.
func TestInheritSeedsTheStalePrimaryTimelineAndDivergence(t *testing.T) {
	var logs bytes.Buffer
	m := fakeMonitor(t, &logs)
	m.Inherit(map[string]NodeMemory{
		"pg2":  {PrimaryTimeline: 3},
		"pg3":  {DivergedFrom: "pg2", DivergedTimeline: 3},
		"pg1":  {DivergedFrom: "gone", DivergedTimeline: 4},
		"gone": {PrimaryTimeline: 9},
	})
	if got := m.Snapshot().NewestPrimaryTimeline; got != 3 {
		t.Errorf("after Inherit the snapshot's newest primary timeline is %d, want 3 (pg2's; the unpolled node's 9 is ignored)", got)
	}
	mem := m.Memory()
	if mem["pg3"] != (NodeMemory{DivergedFrom: "pg2", DivergedTimeline: 3}) {
		t.Errorf("pg3's divergence was not inherited: %+v", mem["pg3"])
	}
	if _, ok := mem["pg1"]; ok {
		t.Errorf("pg1 kept a divergence from a node the monitor does not poll: %+v", mem["pg1"])
	}
	// pg1 claims primary on timeline 1 after a node was seen primary on timeline 3: stale, it gets no writes.
	m.apply(primaryResult(0, 1, 1000, 0), 1)
	snap := publishAt(m, at(10))
	if snap.NewestPrimaryTimeline != 3 {
		t.Errorf("newest primary timeline after pg1's sample: %d, want 3", snap.NewestPrimaryTimeline)
	}
}
