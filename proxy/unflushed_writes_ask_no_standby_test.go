package proxy

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

// snapshotWithFlush is a primary on timeline 1 whose monitor sample says it
// had flushed flush, and a standby that had replayed replayed.
func snapshotWithFlush(flush, replayed route.LSN) *route.Snapshot {
	now := time.Now()
	return &route.Snapshot{Nodes: []route.NodeState{
		{Name: "pg1", Role: route.RolePrimary, Up: true, Timeline: 1, WALPosition: flush + 0x100, FlushPosition: flush, SampledAt: now},
		{Name: "pg2", Role: route.RoleStandby, Up: true, Timeline: 1, WALPosition: replayed, SampledAt: now},
	}}
}

// TestAPositionPastThePrimarysFlushIsOnNoStandby checks the rule that lets
// a read skip asking a standby: no standby replays WAL its primary has not
// flushed, as seen by the position's own read or by the monitor's sample.
func TestAPositionPastThePrimarysFlushIsOnNoStandby(t *testing.T) {
	tl1 := func(lsn route.LSN) route.WritePosition { return route.WritePosition{LSN: lsn, Timeline: 1} }
	cases := []struct {
		name string
		pos  route.WritePosition
		seen []route.WritePosition
		snap *route.Snapshot
		want bool
	}{
		{"past the flush seen and sampled", tl1(0x3000200), []route.WritePosition{tl1(0x3000100)}, snapshotWithFlush(0x3000100, 0x3000100), true},
		{"the monitor saw it flushed since", tl1(0x3000200), []route.WritePosition{tl1(0x3000100)}, snapshotWithFlush(0x3000200, 0x3000100), false},
		{"flushed when its position was read", tl1(0x3000200), []route.WritePosition{tl1(0x3000300)}, snapshotWithFlush(0x3000100, 0x3000100), false},
		{"no flush position known", tl1(0x3000200), nil, snapshotWithFlush(0, 0x3000100), false},
		{"a token has no timeline: ask", route.WritePosition{LSN: 0x3000200}, nil, snapshotWithFlush(0x3000100, 0x3000100), false},
		{"the primary is on another timeline: ask", route.WritePosition{LSN: 0x3000200, Timeline: 2}, []route.WritePosition{{LSN: 0x3000100, Timeline: 2}}, snapshotWithFlush(0x3000100, 0x3000100), false},
		{"a flush seen on another timeline does not count", tl1(0x3000200), []route.WritePosition{{LSN: 0x3000300, Timeline: 2}}, snapshotWithFlush(0x3000100, 0x3000100), true},
		{"no position", route.WritePosition{}, nil, snapshotWithFlush(0x3000100, 0x3000100), false},
	}
	for _, c := range cases {
		if got := notYetFlushed(c.pos, c.seen, c.snap); got != c.want {
			t.Errorf("%s: notYetFlushed = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestANewerWritesPositionIsReadOnceAStandbyCouldHaveTheOlder checks when a
// session may leave its newest write's position unread: only while its last
// position read is on no standby, so the read goes to the primary anyway.
func TestANewerWritesPositionIsReadOnceAStandbyCouldHaveTheOlder(t *testing.T) {
	own := route.WritePosition{LSN: 0x3000200, Timeline: 1}
	seen := route.WritePosition{LSN: 0x3000100, Timeline: 1}
	cases := []struct {
		name string
		ryw  readYourWrites
		snap *route.Snapshot
		want bool
	}{
		{"not flushed, no standby past it", readYourWrites{own: own, flushSeen: seen, unsettled: true}, snapshotWithFlush(0x3000100, 0x3000000), true},
		{"no position read yet", readYourWrites{unsettled: true}, snapshotWithFlush(0x3000100, 0x3000000), false},
		{"flushed since, by the monitor's sample", readYourWrites{own: own, flushSeen: seen, unsettled: true}, snapshotWithFlush(0x3000200, 0x3000000), false},
		{"a standby sampled past it", readYourWrites{own: own, flushSeen: seen, unsettled: true}, snapshotWithFlush(0x3000100, 0x3000200), false},
		{"a standby answered past it", readYourWrites{own: own, flushSeen: seen, unsettled: true,
			learned: []route.NodeReplay{{Node: "pg2", LSN: 0x3000250}}, learnedAt: []time.Time{time.Now().Add(time.Second)}}, snapshotWithFlush(0x3000100, 0x3000000), false},
	}
	for _, c := range cases {
		if got := c.ryw.settleCanWait(c.snap); got != c.want {
			t.Errorf("%s: settleCanWait = %v, want %v", c.name, got, c.want)
		}
	}
}
