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
// # Login: phases, limits and counting
//
// A connection logs in through phases, each with its own bound on what the
// client may send, checked from a message's header before its body is read
// or allocated: the startup packet (and SSLRequest, GSSENCRequest,
// CancelRequest) at most wire.MaxStartupPacketLen, as in PostgreSQL; the
// authentication messages at most loginMessageLimit (auth's password-message
// limit); limits.max_message_size only once the login is over. Framing errors
// before then are FATAL 08P01; the startup packet must end with its one
// final NUL; SSLRequest and GSSENCRequest come at most once each, and none
// inside TLS (a repeated one is answered, as PostgreSQL does, as the
// unsupported protocol version its code is: FATAL 0A000).
//
// From accept to the end of its login (authentication and the first node
// login) a connection is counted in the loginGate (admission.go): at most
// limits.max_logins_in_progress in all and limits.max_logins_in_progress_per_address
// from one IP address. Only then does it count against
// limits.max_client_connections. So sockets that connect and stay silent
// until limits.startup_timeout fill their own address's share and lock no
// one else out. Refused and timed-out logins are logged at info, at most one
// line a second per kind (loginLog), each line counting those it stands for.
//
// # Timeouts
//
// limits.query_timeout cancels a unit on its node (a CancelRequest, the path
// a client's cancel takes) and the client gets 57014 naming the limit;
// limits.idle_transaction_timeout is a read deadline on the client while the
// session waits inside a transaction, and ends the session with FATAL 25P03.
// limits.first_reply_timeout takes a unit off a node the monitor finds
// unresponsive (unresponsive.go): a SIGSTOPped host still acknowledges TCP,
// so nothing else would.
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
// before it and swallows that Parse's reply. A session keeps at most
// limits.max_prepared_statements named statements of at most
// limits.max_prepared_statement_bytes in all: a Parse beyond gets ERROR 53400
// and the rest of its segment is skipped until Sync. Every message sent to a backend
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
// # Read your writes
//
// After a unit that may have written on the primary, once the backend is
// idle, the session reads the primary's insert position there (after
// flushing the client's replies); a read then asks route.Plan with that
// position as SessionFacts.ReadAfter, and when the plan awaits a standby's
// replay, awaitReplay asks the standby's backend for
// pg_last_wal_replay_lsn() and plans again, within
// routing.read_your_writes_wait. readyourwrites.go holds the rules, the
// user scope's shared positions and the pgowl.read_after token.
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
