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
//     is answered (session.exchangeOn and relay). The relay changes the
//     backend's protocol state (its expected replies, status, open batch,
//     skipping) and what must change in a reply's turn (the statement
//     records of messages the node skipped, backend.undo; the deferred
//     BEGIN's NOTICE and log line), and returns an exchangeOutcome: the
//     first SQLSTATE, whether a COMMIT ended a transaction, the final
//     status, the completions,
//  5. applies that outcome to the session's parts (applyOutcome: deferred
//     BEGIN, statements, settings, pins, the held backend, the write
//     position), then writes one routing-log line, and hands the same record
//     to the Options.Observer (package admin: metrics and the routing history).
//
// The client connection is a part of its own (clientConn): its reads and
// writes return clientSideError, so that a lost client is told from a lost
// backend by type (clientSide), not by where the error came from.
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
// # The session's state machine
//
// Between units a session is in one of these states, the values of txState
// (transaction_state.go, where each transition is listed). session.txState
// reads the state from the facts that make it, each kept where it is learnt:
// the held backend's last ReadyForQuery status, its skipping and open-batch
// flags, and the deferred BEGIN. The status byte of a ReadyForQuery pgowl
// sends itself, and whether the client is in a transaction (or a failed
// one), are the state's.
//
//	txState              facts                                  status  what the next unit does
//	idle                 held == nil, deferred == nil           I       planned afresh; any node
//	in block             held.conn.TxStatus == 'T'              T       runs on held (IN_TRANSACTION)
//	failed               held.conn.TxStatus == 'E', or 'T'      E       runs on held, which refuses
//	                     and held.skipping                              all but the end of the block
//	batch failed         held.conn.TxStatus == 'I' and          E       runs on held, which skips
//	                     held.skipping                                  up to Sync
//	deferred             deferred != nil, !deferred.aborted     T       carries BEGIN to the node the
//	                                                                    first statement is planned on
//	deferred-aborted     deferred.aborted                       E       answered by pgowl: 25P02, or
//	                                                                    ROLLBACK for COMMIT/ROLLBACK
//	pinned               held set, status I, no open batch      I       runs on held (SESSION_PINNED)
//	open batch           held.openBatch                         I       stays on held
//	open read-only       held.openBatch && held.openReadOnly    I       stays on held, or leaves it
//	batch                                                               (see "Read-only batches")
//
// Skip-until-Sync is not a transaction state but a fact of its own
// (session.skip, a syncSkip), which may hold in any state: client messages
// are dropped up to Sync, which gets Z with the state's status, or, when
// the refused segment's start is on the held node (skipToNodeSync), goes
// there.
//
// Transitions: a unit's outcome sets them in applyOutcome (afterUnit). ReadyForQuery I with
// no pin and no open batch returns to idle and lets the backend go (held =
// nil); T or E keeps it held. A BEGIN answered by pgowl enters deferred; the
// first statement leaves it for in block (or for deferred-aborted when it
// cannot be routed); a COMMIT or ROLLBACK with nothing run returns to idle
// without a node (classify.TransactionStatement.Kind tells which). An error
// inside an extended batch enters skip-until-Sync on the client side, and
// the backend's skipping mirrors the node's own skip; Sync leaves both. A
// pin is entered by a statement whose effects pin, and left when the node
// says the state is gone (see "Pins").
//
// # Pins
//
// A unit that succeeded with a pinning effect (classify.Session: LISTEN,
// temporary objects, WITH HOLD cursors, session advisory locks, SET ROLE, SQL
// PREPARE, a serializable session default) adds it to the session's pins
// (sessionPins, pins.go: a part of its own, with its state table, that does
// no I/O). Whether a later statement ended that state depends on what else
// the session holds (advisory locks nest), so after a statement that may
// release it (classify.SessionRelease, unknown effects, a rollback while
// pinned) the pins mark a recheck due, and once the session is between
// transactions recheckPins asks the node, with one query, which kinds of
// state remain; the pins settle on the answer and those for the rest end. DISCARD ALL ends every pin. Units whose
// effects pgowl cannot follow statement by statement (multi-statement
// strings, failed units, parts of a batch sent at a Flush) take every pin
// they may have taken and release none.
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
// standby when the plan says so (route.Outcome.LeaveHeldBatch), drops a held
// backend the plan refuses (PRIMARY_REPLACED), acquires the backend, and
// within routing.primary_wait waits for a primary or for a node that did not
// answer to be seen down (or for a primary that refused the login with
// 57P03 to answer the monitor again), then plans again. A standby that
// refuses the session's backend login (28P01, 28000, 3D000: the role or
// database is not replayed there yet; 57P03) is not the client's error:
// choose plans again with it in route.SessionFacts.LoginRefused, and
// node_login_refusals.go remembers the refusal per (node, user, database)
// for a short, bounded while. The login's node order is
// route.PlanLogin. Whether a simple Query is a BEGIN pgowl answers itself is
// route.PlanArrival (session.planArrival gathers its facts), and whether a
// unit may be sent again after its backend died is the plan's
// route.Outcome.Resend, applied to how the backend failed (sendFailure).
//
// A deferred BEGIN (deferbegin.go) is answered by pgowl and sent with the
// transaction's first statement (the plan says which units carry it,
// route.Outcome.CarriesBegin); the plan chooses the node for both and
// returns BEGIN's own decision (route.Outcome.Begin) for its NOTICE and log
// line, while the statement runs IN_TRANSACTION. Only in transaction pooling,
// only a lone BEGIN or START TRANSACTION of a simple Query with no session
// effects, and never one naming SERIALIZABLE (a standby refuses it, and a
// failed BEGIN would leave the statement sent with it running on its own). A
// COMMIT or ROLLBACK before any statement ran is answered by pgowl and uses
// no node. If the first statement cannot be routed the transaction is
// deferred-aborted: statements get 25P02 until the client ends it, and COMMIT
// is answered ROLLBACK, as a node answers the end of a failed transaction.
//
// # A catalogue read in flight
//
// A unit that changes functions, types or views in autocommit on the primary is followed, in the
// same write, by a read of what it changes (sendCatalogueRead, classify/catalog.SessionRead). Its
// replies stay unread once the unit's own are relayed (defersCatalogueRead): the backend keeps
// them, stays the session's, and the session's readOn names it. The read is in flight until one
// of: the next unit is routed (routeAheadOfRead reads it first); pgowl runs a query of its own on
// that backend (settleCatalogueReadOn); a statement whose verdict depends on the catalogue is
// classified (the read is read first); the backend is dropped or the session ends
// (abandonCatalogueRead: the catalogue is told without the read). Reading it tells the catalogue
// of the change (catalogueReadIn). The one exception to "the read is read before the next unit":
// a unit whose statement was classified without the catalogue (provisional effects, the statement
// "ahead" of the read) and that every verdict sends to the same primary (sendsAlikeForAnyEffect)
// is sent first, beside the read on an idle pooled backend when one is free, and the read is read
// and the statement classified again right after it is sent, before any of its replies is relayed
// (sentAheadOfRead, finishAhead). See catalogue_read_in_flight.go. A unit sent behind the read on
// the read's own backend is published for cancel requests with runningStatement.behindRead: a
// client's cancel waits (at most cancelWaitsForCatalogueRead) until the read is read, since the
// node runs the read first and would cancel it instead of the unit; past that wait (a read held on
// a lock) the request goes all the same and cancels the read, and the session passes on another
// for the unit once the read's replies are in (runningStatement.cancelAfterRead). The read bounds
// itself (lock_timeout and statement_timeout for its transaction, see classify/catalog's
// sessionSettings): held on a lock, it fails, and neither the unit behind it nor the session's
// next unit waits for the lock's release.
//
// # A CREATE sent before it is parsed
//
// A CREATE [OR REPLACE] FUNCTION, PROCEDURE, TYPE or VIEW that is not temporary is a write that
// changes the catalogue whatever its parse says (classify.ProvisionalCreate reads that from its
// first words). In an idle session outside a transaction block, holding no backend, with no change
// of its own to tell and no guard configured, it is routed on those effects and classified while
// the node runs it, before any reply reaches the client: the statement is ahead of its own parse
// (aheadStatement.unparsed) and is finished as a statement ahead of a read is (finishAhead). The
// read of its change is written behind it then, or the object it makes kept for the catalogue
// to take (parsedOnceSent). See sent_before_parsed.go.
//
// A SELECT that selects into no table, arriving while the session's own change is still to be
// taken in, goes before its parse too (classify.ProvisionalSelect: one statement, no transaction
// control, no pgowl command). Its provisional effects are a write of unknown effect, so it is sent
// ahead only where every verdict sends it to the same primary (sendsAlikeForAnyEffect); the change
// is taken in and the statement parsed and classified right after it is sent (sentAheadOfRead).
// Where its verdict picks the node (a standby to read on), the change is taken in and the
// statement parsed before it is routed (parseAheadNow), as before.
//
// The object a CREATE makes, when the catalogue takes it from the statement, is prepared while
// the node runs the CREATE (prepareCreatedWhileItRuns): the catalogue with it taken in is derived
// and the object analysed there as its uses will be (catalog.Manager.PrepareTake,
// classify.Classifier.PrepareUses). The session keeps it beside the object
// (classifierState.preparedTake); once the CREATE has committed, the take-in stores it
// (catalog.Manager.TakePreparedSince), unless the held catalogue changed meanwhile, or any
// change was told since the CREATE was sent (the object is then read: classifierState.createdAt). A CREATE that
// failed, or whose outcome is unknown, forgets both (forgetCreated).
//
// # Read-only batches
//
// An extended batch sent at a Flush (without Sync) leaves an implicit
// transaction open on its backend, so the session stays there. When
// everything sent since the last Sync only read, outside any transaction
// block, on a standby (backend.openReadOnly), and the next part of the batch
// writes, the split is safe: leaveReadOnlyBatch ends the implicit transaction
// with a Sync whose reply the client does not see and hands the backend
// back, and the writing part is planned on its own (canLeaveReadOnlyBatch).
// It is not done when the session set a default isolation level above READ
// COMMITTED: the statements of an implicit transaction then share one
// snapshot, which two nodes would not. A part that changes a setting (SET,
// SET LOCAL, set_config) keeps the batch where it is (changesNoSetting): the
// implicit transaction the move would end early decides the setting's fate.
//
// # Skip-until-Sync
//
// After an error in an extended batch PostgreSQL discards messages until
// Sync. pgowl keeps the same rule on both sides: the backend's skipping flag
// follows the node (set by an ErrorResponse in a segment whose Sync was not
// sent yet, so the node skips what comes until it; cleared by the Sync's
// ReadyForQuery; the replies of the skipped messages are dropped from the
// expectation queue), and when pgowl
// itself refuses a message (a Parse beyond the prepared-statement limits, a
// unit that cannot be routed, a lost backend mid-batch) the session's skip
// (skipToSync) drops the client's messages up to its Sync, which is
// answered with ReadyForQuery. If part of the refused segment already
// reached a node (sent at a Flush), the client's Sync still goes there to
// end it (skipToNodeSync).
//
// # Extended protocol across nodes
//
// A client prepares a statement once and executes it many times, and pgowl may
// run those executions on different nodes. The session keeps every prepared
// statement the client made (name, SQL, parameter types, effects) in its
// statementRegistry, and each backend connection records which of them it
// holds (serverStatements, kept in the connection's pool.Conn.Attached slot,
// so that the next session that gets it from the pool knows; the unnamed
// statement's mark lapses at every simple Query the connection sends, which
// drops it on the node). When a Bind or Describe
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
// What a statement sets, and how it replays, comes from classify's typed
// facts (classify.Effects.Settings, Transaction, Loads, DiscardsSequences):
// the proxy does not parse SQL. The session's settingsTracker
// (settings_tracker.go) holds this state, and does no I/O itself. SETs
// inside a transaction wait in its pending list until it commits (COMMIT
// AND CHAIN commits them, ROLLBACK AND CHAIN drops them); a SAVEPOINT
// marks the list, and ROLLBACK TO it cuts the list back to the mark (RELEASE
// drops the mark), as PostgreSQL undoes its settings. Only after a ROLLBACK
// TO a savepoint pgowl did not see set (one set inside a multi-statement
// string) can pgowl not tell which survived: the backend's settings then
// count as unknown and it is reset before its next use. The pgowl.*
// settings follow savepoints the same way (pgowl.go). A change that
// cannot be replayed as sent (set_config inside a function, a computed
// value) is read back from the node once the backend is idle (settings.go).
//
// Each backend connection is marked with what it carries (connSettings, in its connRecord):
// known, with the key of the settings a session applied there ("" for
// none); unknown, after a change pgowl cannot name (reset before its next
// use, whoever gets it); or replay failed (reset and replayed again at its
// next use).
//
// # Listening sessions
//
// A session pinned by LISTEN whose backend is lost, while it is idle (see
// idleRelay) or while one of its statements runs, is closed with FATAL
// 57P01: its notifications would otherwise silently stop.
//
// While the session waits for its client outside a transaction, with the
// LISTEN backend idle, an idleRelay goroutine reads that backend and passes
// on what it sends unasked: notifications, notices and parameter changes (a
// client waiting for a notification sends nothing, so the session's own loop
// would never see them). A watcher ends the session the same way when the
// monitor sees the backend's node stop being the primary, so the client
// listens again on the new one. The relay stops, and hands the backend back
// to the session's loop, before the next client message is handled.
//
// # Read your writes
//
// After a unit that may have written on the primary, once the backend is
// idle, the session reads the primary's insert position there (after
// flushing the client's replies); a read then asks route.Plan with that
// position as SessionFacts.ReadAfter, and when the plan awaits a standby's
// replay, awaitReplay asks the standby's backend for
// pg_last_wal_replay_lsn() and plans again, within
// routing.read_your_writes_wait. A position past the primary's known flush
// position asks no standby (none can have it yet), and while the session's
// last position is in that state its newer writes' positions are not read.
// readyourwrites.go holds the rules, the
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
