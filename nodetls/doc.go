// Package nodetls says how pgowl secures the connections it opens to the
// nodes: the pool's backend connections, the monitor's polling connections
// and the catalogue loader's. Every one of them is made by pgconn (directly
// or through pgx), so the settings are expressed as libpq connection
// keywords (sslmode, sslrootcert, sslcert, sslkey) and pgconn applies them
// with libpq's meaning:
//
//	disable      plain TCP
//	prefer       TLS when the node accepts SSLRequest, its certificate unchecked; plain TCP otherwise
//	require      TLS, its certificate unchecked
//	verify-ca    TLS, the certificate signed by a CA in ca_file (or the system's roots)
//	verify-full  verify-ca, and the certificate names the host pgowl dials
//
// One Settings value, built from the tls.nodes section of the configuration,
// is handed to each of them; none of them decides on TLS by itself. The
// cancels pgowl passes on to other pgowl instances (peering) are secured the
// same way, by a Settings value built from peering.tls (ForPeers), which names
// the peer in its errors.
//
// pgconn builds the TLS configuration for the mode from the connection
// string, but under prefer it answers a node that refuses TLS by dialling a
// second, plain connection (and the node starts a backend for each). Apply
// moves the TLS step into the dial instead, as libpq does it: SSLRequest on
// the new connection; S starts TLS; N goes on in plain TCP on the same
// connection under prefer, and fails the dial (ErrTLSRefused) under require
// and stronger.
package nodetls
