// Package monitor polls every PostgreSQL node pgowl routes to and publishes
// route.Snapshot values: which node is up, which is the primary, each node's
// timeline, and how stale each standby's data is.
//
// # Polling
//
// Each node has one goroutine that owns one persistent pgx connection (simple
// query protocol, so standbys need no prepared statements). A failed dial is
// retried with exponential backoff starting at Options.Interval; a failed
// query closes the connection and the next poll redials. Every dial is
// bounded by Options.DialTimeout and every query by Options.QueryTimeout. One
// round trip per poll reads everything:
//
//	pg_is_in_recovery(); the timeline, from the WAL file name of
//	pg_current_wal_insert_lsn() on a primary (current at once after a
//	promotion) or pg_control_checkpoint().timeline_id on a standby; and
//	pg_current_wal_insert_lsn() on a primary or pg_last_wal_replay_lsn() on a standby;
//	and the node's load (route.NodeLoad): client backends active and waiting on
//	a lock in pg_stat_activity, and max_connections, for the guards' busy limits
//
// A coordinator (the goroutine calling Run) starts a round every Interval. A
// node whose previous poll is still running is skipped, so a hung node only
// delays its own samples. After each round, and after every late result, the
// coordinator assembles a new snapshot and publishes it through an
// atomic.Pointer: Snapshot never blocks, and WaitFor wakes on every publish.
//
// A node is Up while its last answer is younger than Options.DownAfter. A
// single failed poll does not mark a node down, but it does make a standby's
// lag unknown, so reads avoid it at once.
//
// # Lag from WAL positions
//
// Lag is measured from WAL positions, never from commit timestamps (an idle
// primary would make a caught-up standby look ever more behind). The primary's
// samples form a short history of (time, pg_current_wal_insert_lsn()) pairs,
// Options.HistorySize long. For a standby sampled at time t with replay
// position R, against the samples of the primary that finished before t:
//
//   - if R has reached the latest sample's position, the standby has every
//     byte the primary had then: lag is 0 when that sample is no older than
//     Interval, and otherwise the sample's age (an upper bound, so a primary
//     that stopped answering cannot keep a standby at lag 0);
//   - otherwise lag is t minus the time of the oldest sample whose position is
//     beyond R: the primary had WAL the standby lacks at least that long. If
//     even the oldest sample in the history is beyond R, the lag is at least
//     the history's age, and that is what is reported.
//
// LagBytes is the latest primary position minus R. When no primary is
// available because the one node that was primary stopped answering (down,
// or its last sample older than down-after), its last samples still bound the
// standbys' staleness: a standby that replayed the position of the primary's
// last sample lacks at most what was written since that sample was sent, so
// its lag is the sample's age and grows until the lag limit refuses it.
// Writes made since, on that primary or on one promoted after it, are no older
// than the sample. Lag is unknown (LagKnown false) when there is no such
// primary (none was ever sampled, two nodes claim primary, or a node reports
// a newer timeline than the last primary's, as a standby following a promoted
// node does), when the standby's last poll failed, or when no primary sample
// precedes it. NodeState.LagUnknownReason says which.
//
// # Ordering and its bound
//
// Each round polls the nodes not known to be standbys first (the primary, and
// nodes whose role is not yet known), waits for them (at most Interval/2 after
// the first round), and then polls the standbys, so each standby is compared
// with a primary position read just before its own. Only primary samples that
// finished before the standby's query was sent are used, so a standby is never
// compared with a position newer than its own reading.
//
// The bound: a measured lag is a lower bound on the standby's true staleness
// at its sample time, short by less than the gap between the primary sample
// found and the one before it (one Interval while the primary answers every
// round). A lag of 0 means the standby was stale by at most the time between
// the primary's sample and its own: the primary's query time when both were
// polled in the same round (normally well under a millisecond on a LAN), and
// never more than Interval, since an older primary sample yields its age as
// the lag instead. The router adds each sample's age on top of the lag.
//
// # Diverged standbys
//
// A standby that follows a primary cannot have replayed more WAL than the
// primary had inserted at any later moment. When a primary sample sent
// after a standby's answer is behind the standby's replay position, the
// standby has WAL the primary never wrote: it replayed the old primary's WAL
// past the point where a promoted node's timeline forked off (only a
// standby on an older timeline than the primary's is marked). Its lag is
// unknown from then on (no reads) until it reports the primary's timeline
// (rewound or cloned): it may go on replaying an old primary's WAL, and
// the new primary's writes pass its position without it having them. While
// the routed primary was just promoted (seen in recovery, then as primary)
// and its history holds fewer than three samples, a standby ahead of its
// latest sample is not trusted either. The check
// rests on positions only; a diverged standby that never gets ahead of the
// new primary is not detected, and its lag grows until the limit refuses it.
// monitor/divergence_detection_test.go checks, under heavy and odd write loads,
// that no healthy standby is ever marked.
//
// # Timeline
//
// A primary's timeline is the one it inserts WAL on (the WAL file name of its
// insert position), current from the moment it is promoted, so a promoted
// node outranks an old primary that still runs at its first sample. A
// standby's timeline is its last restartpoint's, which lags behind the
// timeline it follows. The monitor remembers the highest timeline it has seen
// a primary on (route.Snapshot.NewestPrimaryTimeline): a node that claims
// primary on an older one is stale and gets no statement, even once the
// promoted node is gone, until pgowl restarts or a reload removes the node
// that was seen primary on the newer timeline.
//
// # Memory across a reload
//
// A reload that edits the node list builds a new monitor. Memory and Inherit
// (memory.go) carry over, for the nodes kept with the same name and address,
// what a sample does not show again: the highest timeline each node was seen
// primary on, and the standbys found diverged. The facts of a removed node,
// or of one removed and added back, are forgotten. InheritSamples
// (handover.go) hands over the old monitor's last poll of each kept node and
// a primary's recent WAL samples: the new monitor starts from them, and its
// first round waits only for the nodes added or changed (a tracker's
// inherited flag holds until its own first answer; polls started while it
// holds are not awaited by the first round).
//
// # Logging
//
// The monitor logs one line per change of a node's state (up/down, role,
// timeline, lag known/unknown), never one per poll.
//
// # TLS
//
// The polling connections follow Options.TLS, the same tls.nodes settings
// as the pool's (package nodetls); the zero value is sslmode=prefer.
package monitor
