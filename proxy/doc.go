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
//  2. decides the node with route.Decide from the effects, the session state
//     and the monitor's latest snapshot of node states,
//  3. takes the session's backend connection to that node (package pool),
//  4. writes a NOTICE naming the node and the reason, forwards the unit, and
//     streams the replies back as raw frames until every message of the unit
//     is answered,
//  5. writes one routing-log line, and hands the same record to the
//     Options.Observer (package admin: metrics and the routing history).
//
// A client that asks for the database pgowl (config.AdminDatabase) gets the
// admin console (Options.Console) instead of a node session, once it has
// authenticated as one of admin.users; anyone else gets 28P01, as an
// unknown user does.
//
// Transaction state is read from ReadyForQuery's status byte: while it is T or
// E the session stays on the backend that started the transaction
// (reason IN_TRANSACTION). State that cannot move between nodes (LISTEN,
// temporary tables, WITH HOLD cursors, session advisory locks, SET ROLE)
// pins the session to its node (reason SESSION_PINNED).
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
// The client's statement names are the session's: a Parse of a name the
// client still holds fails with 42P05 where PostgreSQL's would (the node is
// asked to parse the text under the held statement's managed name), and a
// DEALLOCATE of a protocol-level statement sent as SQL is answered by pgowl,
// as a Close is, since the managed statement may serve other sessions.
//
// # COPY FROM STDIN
//
// While the client sends COPY data, a watcher waits for the node's next
// frame: an error the node raises midway (a constraint, a cancel) reaches
// the client at once, and the client's remaining data is dropped, as the
// node drops it.
//
// # Session settings
//
// SET and RESET run where the statement is routed; the session keeps the
// successful ones and replays them on its other backends before their next
// use, so every node sees the same settings. A LOAD is replayed the same
// way, ahead of the settings. DISCARD SEQUENCES (or ALL) reaches every
// backend of the session, since currval and lastval live where nextval ran.
//
// # Listening sessions
//
// A session pinned by LISTEN whose backend is lost, while it is idle (see
// idleRelay) or while one of its statements runs, is closed with FATAL
// 57P01: its notifications would otherwise silently stop.
//
// # Reload, shutdown and pause
//
// The settings a reload may change (users, routing policy, TLS, access
// rules, node targets) live in one liveSettings value that Instance.Apply
// replaces whole; a changed node list swaps the monitor behind
// switchableNodes once the new one has polled every node. The Server moves
// from serving to draining when Serve's context ends (new clients get 57P01,
// a session ends at its first message outside a transaction, the monitor
// keeps running), to forced at shutdown_timeout (statements cancelled, open
// transactions rolled back, clients told), to stopped. Independently, the
// pauseGate holds units that start new work between PAUSE and RESUME.
package proxy
