// Package pool provides backend connections to the PostgreSQL nodes.
//
// Connections are kept per node and per login (user, database and startup
// parameters). A connection is dialled with pgconn, which performs whatever
// authentication the node asks for (SCRAM-SHA-256, md5, cleartext or trust),
// and is then taken over as a raw socket: from that point the proxy speaks the
// protocol itself and forwards frames without decoding them.
//
// Each node has a cap on the connections open to it (pool.max_per_node).
// Acquire hands out an idle connection of the same login when one exists,
// dials a new one while the node is under its cap, and otherwise waits in
// arrival order until one is released or pool.acquire_timeout passes, when it
// fails with DATABASE_BUSY. A node that refuses a connection with
// too_many_connections is reported the same way.
//
// The pool does not know the protocol state of a connection; the proxy
// resets a connection (ROLLBACK and DISCARD ALL) before it releases it as
// reusable, or releases it as broken so that the pool closes it.
package pool
