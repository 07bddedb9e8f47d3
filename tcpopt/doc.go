// Package tcpopt sets the TCP options that make a vanished peer noticed: a
// host that lost power or a network that was cut sends no FIN and no RST, so
// without them a connection to it waits for a reply for as long as the
// kernel keeps retransmitting (about 15 minutes on Linux) or, when nothing
// is in flight, for ever (keepalives start after two hours by default).
//
// pgowl applies the same Options to its connections to the nodes, where a
// session waiting for a reply from a dead node would otherwise hang with its
// client, and to its client connections, where a client that vanished inside
// a transaction would otherwise hold a backend and its locks.
package tcpopt
