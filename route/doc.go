// Package route makes pgowl's routing decision: given what a statement does
// (a Request), the latest state of every node (a Snapshot) and the operator's
// rules (a Policy), Decide names the node that runs it and why.
//
// # Purity
//
// The package does no I/O, reads no clock and takes no locks. The caller passes
// the current time, so a decision is a function of its inputs and the golden
// tests in testdata/decide_cases.json replay exact situations. The snapshot is
// produced elsewhere (package monitor) and is only read here.
//
// # Writes
//
// A write goes to the primary. A node is "the primary" when its last sample
// says it is not in recovery, it is Up, and that sample is no older than
// Policy.DownAfter. If several nodes qualify (split brain), the one on the
// strictly highest timeline wins; if the highest timeline is shared, Decide
// refuses with NO_PRIMARY rather than guess. Primary applies the same rule on
// its own; the monitor uses it to choose the node lag is measured against.
//
// The zero Request is a write with reason UNKNOWN_EFFECT, so a request whose
// fields were never set goes to the primary. A read must carry READ_ONLY;
// a request or policy that breaks the rules fails with INVALID_REQUEST.
//
// # Reads
//
// A read goes to a qualifying standby: Up, sampled within DownAfter, lag
// known, and effective lag (the measured lag plus the age of the sample it
// came from) within the effective limit, which is Policy.MaxReplicaLag
// tightened by Request.SessionMaxLag when that is set. A session limit can
// only tighten, never loosen. When Policy.MaxReplicaLagBytes is set, the
// byte lag must also be within it. Unknown lag counts as exceeded: routing
// never fails open. Among qualifying standbys Policy.StandbyChoice picks one.
//
// When no standby qualifies, Decide returns NO_READABLE_REPLICA (no standby
// is up) or REPLICA_LAG_EXCEEDED (standbys are up but none qualifies), unless
// Policy.WhenNoStandby is UsePrimary and a primary exists, in which case the
// read runs on the primary with reason FALLBACK_PRIMARY and
// Decision.FallbackRule naming the rule that fell back.
//
// A configuration of exactly one node has no standby to offer: reads go to
// that node with reason NO_STANDBY_CONFIGURED when it is an available
// primary, and otherwise fail with NO_PRIMARY (not NO_READABLE_REPLICA),
// because the missing piece is the primary, not a replica.
//
// # Errors and notices
//
// Every failure is an *Error carrying a Code, the SQLSTATE the proxy sends to
// the client, a message starting "pgowl: <CODE>", a Detail that lists every
// node's state and why it was not chosen, and a Hint. Decision.NoticeMessage
// and Decision.NoticeDetail render the NOTICE the proxy attaches to a routed
// statement: the first in words, the second as key=value pairs for tools.
//
// # Cost
//
// Decide does not allocate on its success path (see BenchmarkDecide); only
// errors, which render their detail text, allocate.
package route
