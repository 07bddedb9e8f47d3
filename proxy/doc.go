// Package proxy is pgowl's client side: it accepts PostgreSQL connections,
// authenticates them, and runs each client session.
//
// # A session's life
//
// A client connects and sends a startup packet (after an optional SSLRequest
// or GSSENCRequest). pgowl authenticates it against the configured users
// (package proxy/auth), logs in to one node with the same credentials to learn
// the server's parameters, and answers with pgowl's own BackendKeyData, so that
// a cancel request comes to pgowl and is passed on to whichever backend is
// running that client's statement.
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
//  5. writes one routing-log line.
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
// # Session settings
//
// SET and RESET run where the statement is routed; the session keeps the
// successful ones and replays them on its other backends before their next
// use, so every node sees the same settings.
package proxy
