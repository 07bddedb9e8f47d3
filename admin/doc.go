// Package admin is what an operator looks at: Prometheus metrics, health
// and readiness checks, the routing history, a status page, and the
// PgBouncer-style admin console on the PostgreSQL port.
//
// # Parts
//
//   - Recorder takes one Unit per routed unit from the proxy (Routed). It
//     counts it in the metrics and writes it to the History ring. Both are
//     cheap, fixed-cost writes: a counter and a histogram, and one copy of the
//     Unit into a preallocated slot. Everything that formats, filters or sorts
//     happens when someone reads (a scrape, /history, SHOW HISTORY).
//   - History is a ring of the last admin.history_size units. A writer takes
//     the next sequence number atomically and fills that slot under the
//     slot's own lock, so writers only meet when the ring has wrapped onto a
//     slot another writer still fills.
//   - Run samples once a second the five minutes of series the status page
//     draws (each node's lag, routed units per node and per reason), and reads
//     every monitor snapshot to count promotions and timeline changes.
//   - Handler serves /metrics, /healthz, /readyz, /history and the status
//     page (/). Readiness is computed from the monitor's latest snapshot at
//     request time (see Ready).
//   - Console answers a client that logged in to the database pgowl as one of
//     admin.users: SHOW POOLS, CLIENTS, SERVERS, STATS, DATABASES, CONFIG,
//     VERSION, HELP with PgBouncer's column names and types, pgowl's own SHOW
//     NODES and SHOW HISTORY, and RELOAD, PAUSE, RESUME (refused as not yet
//     supported). It speaks the simple query protocol only, as PgBouncer's does.
//
// # What is never shown
//
// Statements appear only as pg_query's normalised text (literals replaced by
// $n) and their fingerprint. No metric has a label whose values are unbounded
// or private: labels are node names, roles, reason codes, SQLSTATEs and
// refusal codes; never statement text, users or client addresses.
//
// # Lifecycle commands
//
// RELOAD, PAUSE and RESUME run through the Lifecycle the proxy attaches
// (SetLifecycle); without one they answer 0A000. A reload replaces the
// Settings the console and the metrics read; counters and history stay.
package admin
