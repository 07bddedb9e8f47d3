// Package pool provides backend connections to the PostgreSQL nodes.
//
// Connections are kept per node and per login (user, database and startup
// parameters). A connection is dialled with pgconn, which performs whatever
// authentication the node asks for (SCRAM-SHA-256, md5, cleartext or trust),
// and is then taken over as a raw socket: from that point the proxy speaks the
// protocol itself and forwards frames without decoding them.
//
// Every connection to a node follows Options.TLS (tls.nodes, package
// nodetls): sslmode disable, prefer (TLS when the node offers it, else a new
// plain connection), require, verify-ca or verify-full, with a CA file and a
// client certificate. A connection whose TLS-wrapped socket is idle is
// checked for stray bytes on the socket beneath TLS.
//
// A login without a password but with SCRAMKeys (a client pgowl checked
// against a SCRAM verifier, from auth.users_file or auth.query) is dialled by
// pgowl itself rather than pgconn, which only knows passwords: SCRAM
// passthrough. pgowl answers the node's SCRAM-SHA-256 challenge with a proof
// computed from the ClientKey the client's own proof revealed, and checks the
// node's signature with the verifier's ServerKey. This works when the node
// holds the same verifier (the same salt and iteration count) as pgowl, as it
// does when the verifier was read from that node; any other node
// authentication method is refused with an error that says so.
//
// Each node has a cap on the connections open to it (pool.max_per_node).
// Acquire hands out an idle connection of the same login when one exists,
// dials a new one while the node is under its cap, and otherwise waits in
// arrival order until one is released or pool.acquire_timeout passes, when it
// fails with DATABASE_BUSY. AcquireBriefly (a caller that gives the
// connection back after one round trip: a batch that only prepares) waits
// ahead of every Acquire, so that it does not wait behind transactions.
// AcquireNow and AcquireIdle never wait: they return nothing when no
// connection is to be had at once. A
// node that refuses a connection with too_many_connections is reported the
// same way.
//
// Once a login has acquired a connection to a node, the pool remembers it (at
// most 64 logins per node) and keeps pool.min_idle idle connections open for
// it there. A maintenance goroutine, started by New when pool.min_idle,
// pool.idle_timeout or pool.max_lifetime is set and stopped by Close, runs
// about twice a second. It closes idle connections idle for longer than
// pool.idle_timeout, keeping the most recently used pool.min_idle of a
// remembered login, and idle connections older than pool.max_lifetime,
// whatever min_idle says. Then it dials in the background what each
// remembered login lacks of min_idle, while the node is under its cap and no
// Acquire waits for it, a few dials at a time. A background dial that fails
// pauses the node's background dials for a few seconds, so that a node that
// is down is not hammered; a login the node refuses (bad password, missing
// database) is forgotten instead. A connection dialled before CloseNode is
// closed rather than kept. A node a reload adds (RememberLoginsOf) or moves to a new address
// (MoveNode, which also closes the old address's connections) is given the logins remembered on
// every node, and has their min_idle connections dialled at once, before its first statement; a
// node a reload removes (ForgetNode) loses its logins, so that no background dial goes to it
// again. An Acquire that began before such a change does not remember its login or address.
// RetireDatabase ends the pooled life of a database's connections dialled until then (a login's
// defaults changed): idle ones close at once, those in use when released; the logins stay
// remembered, so min_idle dials new ones. RetireDatabaseOn does the same on one node, up to a
// given time (a standby replayed the change then).
//
// An idle connection can die without the pool noticing (the node restarted,
// pg_terminate_backend, a firewall dropped it). When Acquire takes one that
// sat idle for longer than pool.health_check_after, it sends it an empty
// query and waits for ReadyForQuery, for at most min(pool.dial_timeout, 2s).
// A connection that fails the check is closed, and Acquire goes on to the
// next idle connection of the login, or dials one in the dead one's slot. A
// connection handed from Release straight to a waiting Acquire is not checked.
//
// The pool does not know the protocol state of a connection; the proxy
// resets a connection (ROLLBACK and DISCARD ALL) before it releases it as
// reusable, or releases it as broken so that the pool closes it.
package pool
