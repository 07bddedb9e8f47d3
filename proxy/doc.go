// Package proxy is pgowl's client side: it accepts PostgreSQL connections,
// authenticates them, and runs each client session.
//
// # A session's life
//
// A client connects and sends a startup packet (after an optional SSLRequest
// or GSSENCRequest). SSLRequest is answered S when a certificate is
// configured and tls.client_mode is not disable; the handshake asks for a
// client certificate when tls.client_ca_file is set. Once the startup packet
// names the user and database, pgowl applies, in this order (clientauth.go):
//
//  1. tls.client_mode: require, verify-ca and verify-full refuse a client
//     without TLS (28000); verify-full also wants the certificate's common
//     name to be the user name.
//  2. The access rules (package proxy/access): the first rule matching the
//     client's address, TLS, database and user gives the method, or rejects
//     (28000). Without rules, the user's own method applies.
//  3. The authentication exchange (package proxy/auth) against the users
//     list, auth.users_file and auth.query: SCRAM-SHA-256, offered with
//     SCRAM-SHA-256-PLUS over TLS; md5; trust; or cert.
//
// It then logs in to one node to learn the server's parameters: with the
// user's password from the users list, or, for a user known only by its
// SCRAM verifier, with SCRAM passthrough (package pool). It answers with
// pgowl's own BackendKeyData, so that a cancel request comes to pgowl and is
// passed on to whichever backend is running that client's statement.
//
// SHOW pgowl.nodes and SHOW pgowl.explain answer only the users in
// admin.users when that list is set (42501 for others).
//
// From then on the session reads client messages and groups them into routed
// units: one simple Query, or an extended-protocol batch up to Sync (or up to
// Flush, when the client waits for partial results). For each unit it
//
//  1. classifies the statements (package classify),
//  2. decides the node with route.Plan (see "Where routing is decided"),
//  3. takes the session's backend connection to that node (package pool),
//  4. writes a NOTICE naming the node and the reason, forwards the unit, and
//     streams the replies back as raw frames until every message of the unit
//     is answered,
//  5. writes one routing-log line.
//
// Transaction state is read from ReadyForQuery's status byte: while it is T or
// E the session stays on the backend that started the transaction
// (reason IN_TRANSACTION). State that cannot move between nodes (LISTEN,
// temporary tables, WITH HOLD cursors, session advisory locks, SET ROLE)
// pins the session to its node (reason SESSION_PINNED).
//
// # Where routing is decided
//
// Every routing decision is made by route.Plan, a pure function of the
// unit's statement (route.Statement: access, reason, subject, the pins it
// takes, and whether it only prepares or ends no transaction), the session's
// facts (route.SessionFacts: the held node and its pins, a deferred BEGIN the
// unit carries, the settings that need the primary, the session's lag limit
// and read counter, the standbys whose pool is exhausted and the nodes the
// session is connected to), the monitor's snapshot, the policy and the time.
// The proxy only gathers those facts (session.planRequest, choose.go) and
// does the I/O around the plan in choose: it leaves a read-only batch's
// standby, drops a held backend the plan refuses (PRIMARY_REPLACED),
// acquires the backend, and within routing.primary_wait waits for a primary
// or for a node that did not answer to be seen down, then plans again.
// The login's node order is route.PlanLogin. What the proxy still decides
// itself is whether a BEGIN may be deferred (canDeferBegin), whether a
// batch may leave its standby (canLeaveReadOnlyBatch), and whether a unit
// may be sent again after its backend died (safeToResend).
//
// A deferred BEGIN (deferbegin.go) is answered by pgowl and sent with the
// transaction's first statement; the plan chooses the node for both and
// returns BEGIN's own decision (route.Outcome.Begin) for its NOTICE and log
// line, while the statement runs IN_TRANSACTION.
//
// # Extended protocol across nodes
//
// A client prepares a statement once and executes it many times, and pgowl may
// run those executions on different nodes. The session keeps every prepared
// statement the client made (name, SQL, parameter types, effects) and each
// backend connection records which of them it holds. When a Bind or Describe
// reaches a backend that lacks the statement, the session injects a Parse
// before it and swallows that Parse's reply. Every message sent to a backend
// is entered in an expectation queue, so the replies are matched to the
// messages in order, an ErrorResponse drops the rest of its Sync segment
// (skip-until-Sync), and the session knows exactly when a unit is complete.
//
// # Session settings
//
// SET and RESET run where the statement is routed; the session keeps the
// successful ones and replays them on its other backends before their next
// use, so every node sees the same settings.
package proxy
