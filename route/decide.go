package route

import (
	"fmt"
	"strconv"
	"time"
)

// Decide picks the node that runs req, given the latest snapshot, the policy
// and the current time. On failure the error is an *Error; the package
// documentation states the rules.
func Decide(req Request, snap *Snapshot, pol Policy, now time.Time) (Decision, error) {
	if err := pol.Validate(); err != nil {
		return Decision{}, err
	}
	if err := validateRequest(req); err != nil {
		return Decision{}, err
	}
	if snap == nil {
		snap = &Snapshot{}
	}
	switch req.Access {
	case AccessWrite:
		primary, err := Primary(snap, pol, now)
		if err != nil {
			return Decision{}, err
		}
		return primaryDecision(snap, primary, req, req.Reason), nil
	case AccessRead:
		return decideRead(req, snap, pol, now)
	default:
		return Decision{}, invalidRequest("request has " + req.Access.String())
	}
}

// Primary returns the index in snap.Nodes of the node writes go to, using
// only pol.DownAfter, or a NO_PRIMARY *Error when no node is an available,
// unambiguous primary. The monitor uses it to pick the node whose WAL
// position standby lag is measured against.
func Primary(snap *Snapshot, pol Policy, now time.Time) (int, error) {
	if pol.DownAfter <= 0 {
		return -1, invalidRequest("policy down-after must be positive, got " + pol.DownAfter.String())
	}
	if snap == nil {
		snap = &Snapshot{}
	}
	primary, tied, timeline := findPrimary(snap, pol, now)
	if primary < 0 {
		return -1, noPrimaryError(snap, pol, now, tied, timeline)
	}
	return primary, nil
}

func validateRequest(req Request) *Error {
	switch req.Access {
	case AccessRead:
		switch req.Reason {
		case ReasonReadOnly, ReasonHint, ReasonOverride:
		default:
			return invalidRequest("read request has reason " + req.Reason.String() + ", want READ_ONLY, HINT or OVERRIDE")
		}
	case AccessWrite:
		switch req.Reason {
		case ReasonUnknownEffect, ReasonWrite, ReasonRowLock, ReasonWritingFunction,
			ReasonInTransaction, ReasonSessionPinned, ReasonNodeLocalStats, ReasonHint, ReasonNestingTooDeep:
		default:
			return invalidRequest("write request has reason " + req.Reason.String())
		}
	default:
		return invalidRequest("request has " + req.Access.String())
	}
	return nil
}

func decideRead(req Request, snap *Snapshot, pol Policy, now time.Time) (Decision, error) {
	if len(snap.Nodes) == 1 {
		primary, _, _ := findPrimary(snap, pol, now)
		if primary < 0 {
			n := &snap.Nodes[0]
			err := NewError(NoPrimary,
				"the only configured node, "+n.Name+", is not an available primary, and there is no standby to read from",
				nodeDetail(snap, now, func(_ int, n *NodeState) string { return primaryWhyNot(n, pol, now) }))
			return Decision{}, err
		}
		return primaryDecision(snap, primary, req, ReasonNoStandbyConfigured), nil
	}

	maxLag := EffectiveMaxLag(pol, req)
	chosen := chooseStandby(req, snap, pol, now, maxLag)
	if chosen >= 0 {
		n := &snap.Nodes[chosen]
		return Decision{
			Node:      n.Name,
			NodeIndex: chosen,
			Role:      RoleStandby,
			Reason:    req.Reason,
			Lag:       n.Lag + sampleAge(n, now),
			LagBytes:  n.LagBytes,
			LagKnown:  true,
			Subject:   req.Subject,
		}, nil
	}

	code := NoReadableReplica
	for i := range snap.Nodes {
		if standbyUp(&snap.Nodes[i], pol, now) {
			code = ReplicaLagExceeded
			break
		}
	}
	primary, _, _ := findPrimary(snap, pol, now)
	if pol.WhenNoStandby == UsePrimary && primary >= 0 {
		d := primaryDecision(snap, primary, req, ReasonFallbackPrimary)
		d.FallbackRule = codeNames[code]
		return d, nil
	}
	return Decision{}, noStandbyError(code, snap, pol, now, maxLag, primary >= 0)
}

// chooseStandby returns the index of the qualifying standby that the policy
// picks, or -1 when none qualifies. Standbys in req.Avoid are picked only
// when no other qualifies; those in req.Exclude never. It must not allocate.
func chooseStandby(req Request, snap *Snapshot, pol Policy, now time.Time, maxLag time.Duration) int {
	if req.Avoid != 0 {
		if i := chooseStandbyAmong(req, snap, pol, now, maxLag, req.Avoid|req.Exclude); i >= 0 {
			return i
		}
	}
	return chooseStandbyAmong(req, snap, pol, now, maxLag, req.Exclude)
}

// chooseStandbyAmong is chooseStandby over the standbys not in skip.
func chooseStandbyAmong(req Request, snap *Snapshot, pol Policy, now time.Time, maxLag time.Duration, skip uint64) int {
	best := -1
	var bestLag time.Duration
	switch pol.StandbyChoice {
	case LeastLag:
		for i := range snap.Nodes {
			lag, ok := qualifyingLag(&snap.Nodes[i], pol, now, maxLag)
			if !ok || skipped(skip, i) {
				continue
			}
			if best < 0 || lag < bestLag {
				best, bestLag = i, lag
			}
		}
	case LeastConnections:
		for i := range snap.Nodes {
			n := &snap.Nodes[i]
			lag, ok := qualifyingLag(n, pol, now, maxLag)
			if !ok || skipped(skip, i) {
				continue
			}
			if best < 0 || n.InUse < snap.Nodes[best].InUse ||
				(n.InUse == snap.Nodes[best].InUse && lag < bestLag) {
				best, bestLag = i, lag
			}
		}
	case RoundRobin:
		count := uint64(0)
		for i := range snap.Nodes {
			if _, ok := qualifyingLag(&snap.Nodes[i], pol, now, maxLag); ok && !skipped(skip, i) {
				count++
			}
		}
		if count == 0 {
			return -1
		}
		turn := req.Turn % count
		for i := range snap.Nodes {
			if _, ok := qualifyingLag(&snap.Nodes[i], pol, now, maxLag); !ok || skipped(skip, i) {
				continue
			}
			if turn == 0 {
				return i
			}
			turn--
		}
	}
	return best
}

func skipped(mask uint64, i int) bool { return i < 64 && mask&(1<<uint(i)) != 0 }

// findPrimary returns the index of the primary, or -1 with the number of
// nodes tied on the highest timeline (0 when no node is an available primary).
func findPrimary(snap *Snapshot, pol Policy, now time.Time) (index, tied int, timeline uint32) {
	index = -1
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if !primaryAvailable(n, pol, now) || stalePrimary(snap, n) {
			continue
		}
		switch {
		case tied == 0 || n.Timeline > timeline:
			index, tied, timeline = i, 1, n.Timeline
		case n.Timeline == timeline:
			tied++
		}
	}
	if tied > 1 {
		return -1, tied, timeline
	}
	return index, tied, timeline
}

// stalePrimary reports whether n claims primary on a timeline older than one
// a node has been seen primary on (see Snapshot.NewestPrimaryTimeline).
func stalePrimary(snap *Snapshot, n *NodeState) bool {
	return n.Role == RolePrimary && n.Timeline < snap.NewestPrimaryTimeline
}

func primaryDecision(snap *Snapshot, index int, req Request, reason Reason) Decision {
	return Decision{
		Node:      snap.Nodes[index].Name,
		NodeIndex: index,
		Role:      RolePrimary,
		Reason:    reason,
		LagKnown:  true,
		Subject:   req.Subject,
	}
}

func sampleAge(n *NodeState, now time.Time) time.Duration {
	age := now.Sub(n.SampledAt)
	if age < 0 {
		return 0
	}
	return age
}

// fresh reports whether n answered recently enough to be believed.
func fresh(n *NodeState, pol Policy, now time.Time) bool {
	return n.Up && !n.SampledAt.IsZero() && sampleAge(n, now) <= pol.DownAfter
}

func primaryAvailable(n *NodeState, pol Policy, now time.Time) bool {
	return n.Role == RolePrimary && fresh(n, pol, now)
}

func standbyUp(n *NodeState, pol Policy, now time.Time) bool {
	return n.Role == RoleStandby && fresh(n, pol, now)
}

// qualifyingLag returns n's effective lag (lag plus sample age) and whether
// n is a standby that may serve a read under maxLag and the byte limit.
func qualifyingLag(n *NodeState, pol Policy, now time.Time, maxLag time.Duration) (time.Duration, bool) {
	if n.Role != RoleStandby || !n.Up || !n.LagKnown || n.SampledAt.IsZero() {
		return 0, false
	}
	if pol.MaxReplicaLagBytes != 0 && n.LagBytes > pol.MaxReplicaLagBytes {
		return 0, false
	}
	age := sampleAge(n, now)
	if age > pol.DownAfter {
		return 0, false
	}
	lag := n.Lag + age
	return lag, lag <= maxLag
}

// freshnessWhyNot says why n cannot be believed, or "" when it can.
func freshnessWhyNot(n *NodeState, pol Policy, now time.Time) string {
	switch {
	case n.SampledAt.IsZero():
		return "never answered"
	case !n.Up:
		return "down"
	case sampleAge(n, now) > pol.DownAfter:
		return "last sample is older than down-after " + formatDuration(pol.DownAfter)
	}
	return ""
}

func primaryWhyNot(n *NodeState, pol Policy, now time.Time) string {
	switch n.Role {
	case RoleStandby:
		return "in recovery"
	case RoleUnknown:
		if why := freshnessWhyNot(n, pol, now); why != "" {
			return "role unknown, " + why
		}
		return "role unknown"
	}
	return freshnessWhyNot(n, pol, now)
}

func noPrimaryError(snap *Snapshot, pol Policy, now time.Time, tied int, timeline uint32) *Error {
	what := "no node is an available primary"
	if len(snap.Nodes) == 0 {
		what = "no nodes are configured"
	}
	if tied > 1 {
		what = fmt.Sprintf("%d nodes claim to be primary on timeline %d; refusing to guess which is real", tied, timeline)
	}
	return NewError(NoPrimary, what, nodeDetail(snap, now, func(_ int, n *NodeState) string {
		if why := primaryWhyNot(n, pol, now); why != "" {
			return why
		}
		if stalePrimary(snap, n) {
			return "a stale primary: claims primary on timeline " + strconv.FormatUint(uint64(n.Timeline), 10) +
				", but a node was seen primary on timeline " + strconv.FormatUint(uint64(snap.NewestPrimaryTimeline), 10) +
				" (its writes since are on an abandoned branch; restart pgowl to accept it again)"
		}
		if n.Timeline < timeline {
			return "claims primary on timeline " + strconv.FormatUint(uint64(n.Timeline), 10) +
				", behind timeline " + strconv.FormatUint(uint64(timeline), 10)
		}
		return "claims primary on timeline " + strconv.FormatUint(uint64(n.Timeline), 10) + ", as does another node"
	}))
}

func noStandbyError(code Code, snap *Snapshot, pol Policy, now time.Time, maxLag time.Duration, primaryExists bool) *Error {
	var what string
	if code == NoReadableReplica {
		what = "no standby is up to run this read"
	} else {
		what = "no standby is within the lag limit of " + formatDuration(maxLag)
		if pol.MaxReplicaLagBytes > 0 {
			what += " and " + strconv.FormatUint(pol.MaxReplicaLagBytes, 10) + " bytes"
		}
	}
	if pol.WhenNoStandby == UsePrimary && !primaryExists {
		what += ", and no primary is available to fall back to"
	}
	return NewError(code, what, nodeDetail(snap, now, func(_ int, n *NodeState) string {
		switch n.Role {
		case RolePrimary:
			if why := primaryWhyNot(n, pol, now); why != "" {
				return "primary, " + why
			}
			if pol.WhenNoStandby == UsePrimary {
				return "primary, but another node claims primary on the same timeline"
			}
			return "primary; reads need a standby"
		case RoleUnknown:
			return primaryWhyNot(n, pol, now)
		}
		if why := freshnessWhyNot(n, pol, now); why != "" {
			return why
		}
		if !n.LagKnown {
			if n.LagUnknownReason != "" {
				return "lag unknown: " + n.LagUnknownReason
			}
			return "lag unknown"
		}
		if lag := n.Lag + sampleAge(n, now); lag > maxLag {
			return "effective lag " + formatDuration(lag) + " exceeds limit " + formatDuration(maxLag)
		}
		return "lag " + strconv.FormatUint(n.LagBytes, 10) + " bytes exceeds limit " +
			strconv.FormatUint(pol.MaxReplicaLagBytes, 10) + " bytes"
	}))
}

// formatDuration renders d for people: whole milliseconds below a second
// ("40ms"), seconds with up to three decimals above ("5s", "7.25s").
func formatDuration(d time.Duration) string {
	return string(appendDuration(nil, d))
}

// appendDuration appends formatDuration's text for d to dst.
func appendDuration(dst []byte, d time.Duration) []byte {
	ms := d.Milliseconds()
	if ms < 1000 && ms > -1000 {
		return append(strconv.AppendInt(dst, ms, 10), "ms"...)
	}
	return append(strconv.AppendFloat(dst, float64(ms)/1000, 'f', -1, 64), 's')
}
