// Package route makes pgowl's routing decision: given what a statement does
// (a Request), the latest state of every node (a Snapshot) and the operator's
// rules (a Policy), Decide names the node that runs it and why. Plan wraps
// Decide with what the session knows (see Plans): it is the one place where
// the proxy's routing is decided.
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
// # Plans
//
// Decide routes one request. Plan routes a unit of a session: it takes the
// statement (Statement), the session's facts (SessionFacts), the snapshot,
// the policy and the time, and returns an Outcome or an *Error. It is where
// every rule that depends on the session lives:
//
//   - A session that holds a node (an open transaction, an unsynced batch,
//     a pin) stays there: IN_TRANSACTION, or SESSION_PINNED naming the pins.
//     The decision reports the node's current role and lag. When the node
//     was taken as the primary and the snapshot shows another primary, or
//     the node in recovery, Plan refuses with PRIMARY_REPLACED (08006).
//   - A statement that takes pinning state (Statement.Pins) is a
//     SESSION_PINNED write: the node must run whatever the session does next.
//   - A deferred BEGIN (SessionFacts.Deferred) goes with every unit of its
//     transaction until one runs, unless the transaction is aborted or the
//     unit is a synced batch that only prepares, which runs outside it
//     (Outcome.CarriesBegin). When carried: a
//     read-write BEGIN takes a first read to the primary; a READ ONLY one
//     goes where BEGIN READ ONLY would go, unless its first statement needs
//     the primary, which it then follows (Outcome.BeginFollowsStatement).
//     Outcome.Begin is BEGIN's decision with BEGIN's reason (or the
//     fallback's); the statement itself runs IN_TRANSACTION.
//   - Settings that need the primary (SessionFacts.PrimaryOnly: a
//     serializable default from the login or read back) make every read a
//     SESSION_PINNED write.
//   - A unit that only prepares a read (ShapePrepareOnly, a READ_ONLY read
//     "prepare only: nothing executes") or a lone COMMIT/ROLLBACK with no
//     transaction anywhere (ShapeEndsNoTransaction) falls back to the primary
//     when no standby qualifies, whatever Policy.WhenNoStandby says. A unit
//     that only prepares a write goes to the primary, where the write will
//     run, with the write's reason ("prepare only, where it runs: ..."): a
//     standby that has not replayed the table or function the statement
//     names (created by the session a moment ago) would fail its parse.
//     Without an available primary, or with SessionFacts.PrimaryFull (no
//     primary backend free at once: the proxy does not let a write's
//     prepare wait for one), it goes where a read's prepare would.
//   - A read chosen on a standby whose pool is exhausted (SessionFacts.Avoid)
//     and where the session has no backend (SessionFacts.Connected) moves to
//     another qualifying standby, deciding again with Request.Avoid.
//   - A guarded statement (SessionFacts.Guard: its traffic class, with busy
//     limits) is not sent to a node at one of the guard's limits: active
//     client backends as a count or a share of max_connections
//     (NodeState.Load, read by the monitor), or the class's own statements
//     in flight there through this pgowl (Guard.InFlight). A read moves to
//     another qualifying standby under the limits; without one, or for a
//     statement that needs the primary, Plan refuses with DATABASE_BUSY and
//     every node's load in the detail. A read never moves to the primary
//     for load, nor falls back to a busy primary for read your writes, and
//     a held backend keeps its unit (the transaction has started there). The zero Guard, business traffic, is never refused
//     for load. The cost guard (EXPLAIN) is I/O and lives in the proxy.
//   - Read your writes (SessionFacts.ReadAfter, readafter.go): a read that
//     Decide sends to a standby goes only to a standby known to have
//     replayed the session's write position (the snapshot's WALPosition, or
//     a position the proxy learned, SessionFacts.Replayed), the others
//     excluded with Request.Exclude. With none, Outcome.AwaitReplay asks
//     the proxy to ask the qualifying standby known nearest to it; once the
//     wait is over (SessionFacts.ReadAfterWaitOver) the read goes to the
//     primary with READ_YOUR_WRITES, or is refused with
//     REPLICA_LAG_EXCEEDED under Policy.ReadYourWritesReject. A read Decide
//     refuses or sends to the primary is left as it is. A position from a
//     timeline older than the primary's is capped at the primary's sampled
//     position: past the fork point it is lost on every node.
//   - Standbys that refused the session's backend login just now
//     (SessionFacts.LoginRefused: a role or database not replayed there
//     yet, or a node not accepting connections) never get the read
//     (Request.Exclude). When they were the only qualifying standbys the
//     read follows Policy.WhenNoStandby: FALLBACK_PRIMARY with FallbackRule
//     NO_READABLE_REPLICA and Decision.LoginRefused naming them, or the
//     refusal NO_READABLE_REPLICA saying so. A write is not affected.
//   - A held backend whose open batch (sent at a Flush) only read on a
//     standby, outside a block, without an error and with no reply
//     pending, is left when the next part needs the primary, unless a pin,
//     a deferred BEGIN or a default isolation level the session set keeps
//     it (Outcome.LeaveHeldBatch): the proxy ends the batch there and plans
//     again with SessionFacts.LeftReadOnlyBatch.
//   - Outcome.Resend says when a unit whose backend failed before any reply
//     reached the client may be sent again (Resend.Allows, given how the
//     backend failed): never from a held node; a read that pins nothing
//     even when it ran, unless the node went silent; a prepare-only unit
//     likewise, except after being taken off an unresponsive node; anything
//     else only when it cannot have run.
//
// PlanArrival says whether a simple Query needs a node at all: in
// transaction pooling a lone BEGIN (not naming SERIALIZABLE, with nothing
// holding the session) is answered by the proxy and sent later with the
// transaction's first statement (ArriveDeferBegin); a lone COMMIT or
// ROLLBACK of a deferred transaction that ran nothing is answered without a
// node (COMMIT of an aborted one as ROLLBACK), and any other statement of an
// aborted one is refused with 25P02.
//
// PlanLogin orders the nodes a new session logs in to: up primaries first.
// The golden tests in testdata/plan_cases.json cover every reason, every
// pin, every refusal and each of these facts.
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
