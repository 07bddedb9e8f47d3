package proxy

import (
	"testing"
	"time"
)

// A stall of pgowl itself (a late watcher tick) must not make a node look
// unresponsive: for one down_after after the resumption, samples taken
// before it are excused; later, and for samples taken after it, the rule is
// the usual one.
func TestStallOfPgowlExcusesOldSamplesForOneDownAfter(t *testing.T) {
	const period = 100 * time.Millisecond
	const downAfter = time.Second
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var c stallClock
	c.tick(t0, period)
	c.tick(t0.Add(period), period)
	sampled := t0
	if c.excuses(sampled, downAfter, t0.Add(period)) {
		t.Fatal("ticks on time: nothing may be excused")
	}

	resumed := t0.Add(period + 1500*time.Millisecond) // the process did not run for 1.5s
	c.tick(resumed, period)
	if !c.excuses(sampled, downAfter, resumed) {
		t.Error("a sample from before the stall was not excused right after it")
	}
	if !c.excuses(sampled, downAfter, resumed.Add(downAfter)) {
		t.Error("a sample from before the stall was not excused within down_after of the resumption")
	}
	if c.excuses(sampled, downAfter, resumed.Add(downAfter+period)) {
		t.Error("a sample from before the stall was still excused past down_after after the resumption")
	}
	if c.excuses(resumed.Add(10*time.Millisecond), downAfter, resumed.Add(50*time.Millisecond)) {
		t.Error("a sample taken after the resumption was excused")
	}
	c.tick(resumed.Add(period), period)
	if !c.excuses(sampled, downAfter, resumed.Add(period)) {
		t.Error("an on-time tick after the stall ended the excuse early")
	}
}
