package route

import (
	"strings"
	"time"
)

// planReadAfter narrows a read that Decide sent to a standby (first) to the
// standbys known to have replayed the session's write position s.ReadAfter
// (read your writes). It returns the standby to use; or, when no qualifying
// standby is known to have it and the wait is not over, the first choice
// with await set (the proxy asks that standby and plans again); or, once
// the wait is over, the primary with reason READ_YOUR_WRITES, or the
// refusal REPLICA_LAG_EXCEEDED under Policy.ReadYourWritesReject. req gets
// the excluded standbys, so that spreading reads keeps to the others.
func planReadAfter(req *Request, s *SessionFacts, snap *Snapshot, pol Policy, now time.Time, first Decision) (dec Decision, await bool, err error) {
	target := readTarget(s.ReadAfter, snap)
	first.ReadAfter = target
	var behind uint64
	for i := range snap.Nodes {
		if i < 64 && snap.Nodes[i].Role == RoleStandby && replayedAt(snap, i, s.Replayed) < target {
			behind |= 1 << uint(i)
		}
	}
	first.NodeReplay = replayedAt(snap, first.NodeIndex, s.Replayed)
	if !skipped(behind, first.NodeIndex) {
		req.Exclude |= behind
		return first, false, nil
	}
	narrowed := *req
	narrowed.Exclude |= behind
	if i := chooseStandby(narrowed, snap, pol, now, EffectiveMaxLag(pol, narrowed)); i >= 0 {
		// A standby already known to be past the position: no question to ask.
		*req = narrowed
		n := &snap.Nodes[i]
		return Decision{Node: n.Name, NodeIndex: i, Role: RoleStandby, Reason: req.Reason,
			Lag: n.Lag + sampleAge(n, now), LagBytes: n.LagBytes, LagKnown: true, Subject: req.Subject,
			ReadAfter: target, NodeReplay: replayedAt(snap, i, s.Replayed)}, false, nil
	}
	if !s.ReadAfterWaitOver {
		// Ask the qualifying standby nearest to the position.
		maxLag, ask := EffectiveMaxLag(pol, *req), first.NodeIndex
		for i := range snap.Nodes {
			if _, ok := qualifyingLag(&snap.Nodes[i], pol, now, maxLag); ok && !skipped(s.LoginRefused, i) && replayedAt(snap, i, s.Replayed) > replayedAt(snap, ask, s.Replayed) {
				ask = i
			}
		}
		if ask != first.NodeIndex {
			n := &snap.Nodes[ask]
			first = Decision{Node: n.Name, NodeIndex: ask, Role: RoleStandby, Reason: req.Reason,
				Lag: n.Lag + sampleAge(n, now), LagBytes: n.LagBytes, LagKnown: true, Subject: req.Subject,
				ReadAfter: target, NodeReplay: replayedAt(snap, ask, s.Replayed)}
		}
		return first, true, nil
	}
	primary, _, _ := findPrimary(snap, pol, now)
	if pol.ReadYourWritesReject || primary < 0 {
		return Decision{}, false, readAfterError(snap, pol, now, target, s, primary >= 0 || pol.ReadYourWritesReject)
	}
	dec = primaryDecision(snap, primary, *req, ReasonReadYourWrites)
	dec.ReadAfter, dec.Behind, dec.NodeReplay = target, first.Node, first.NodeReplay
	dec.ReadAfterChange, dec.ReadAfterChanged = s.ReadAfterChange, s.ReadAfterChanged
	return dec, false, nil
}

// readAfterError refuses a read that no standby could serve with the
// session's last write, or with a definition change the read rests on
// (SessionFacts.ReadAfterChange): REPLICA_LAG_EXCEEDED, with the position
// in the detail.
func readAfterError(snap *Snapshot, pol Policy, now time.Time, target LSN, s *SessionFacts, primaryExists bool) *Error {
	learned := s.Replayed
	what := "no standby replayed " + readAfterWhat(s.ReadAfterChange, s.ReadAfterChanged) + " (" + target.String() + ") within routing.read_your_writes_wait"
	if !primaryExists {
		what += ", and no primary is available to fall back to"
	}
	var b strings.Builder
	b.WriteString("wait_lsn=")
	b.WriteString(target.String())
	b.WriteByte('\n')
	b.WriteString(nodeDetail(snap, now, func(i int, n *NodeState) string {
		if n.Role != RoleStandby {
			return ""
		}
		at := replayedAt(snap, i, learned)
		if at == 0 {
			return "replay position unknown"
		}
		return "replayed " + at.String()
	}))
	return NewError(ReplicaLagExceeded, what, b.String())
}

// readAfterWhat names what a read had to see: the session's last write, or
// the change of a definition it rests on.
func readAfterWhat(change bool, changed string) string {
	switch {
	case !change:
		return "this session's last write"
	case changed == "":
		return "a definition change this read rests on"
	}
	return "the change of " + changed + " this read rests on"
}
