// Package wire reads and writes PostgreSQL protocol frames without decoding
// them.
//
// A frame is a type byte, a four-byte big-endian length that counts itself,
// and a body. The proxy's hot path forwards frames from a backend to a client
// as raw bytes: it reads only the five-byte header and hands the body on
// untouched, so a DataRow is never decoded and never copied into a message
// struct. The few messages pgowl must understand (ReadyForQuery,
// ErrorResponse, ParseComplete and friends) are read whole by the caller and
// decoded with pgproto3 where the contents matter.
//
// A type byte means different messages in the two directions ('E' is Execute
// from a client and ErrorResponse from a server), so the types are named per
// direction (messages.go: MsgQuery, MsgExecute, ... sent by a client;
// MsgErrorResponse, MsgReadyForQuery, ... sent by a server), with the
// ReadyForQuery status bytes (TxIdle, TxInBlock, TxFailed), the Describe and
// Close targets and the SSLRequest answers. Product code compares frame types
// with these names only.
//
// Reader enforces a maximum body size on every frame, the defence against a
// peer that announces a huge message to exhaust memory; SetMaxBody changes
// it between protocol phases (a client's login accepts far less than its
// session), and untyped startup packets are bounded by MaxStartupPacketLen. Bodies returned by
// Reader are only valid until the next call, as in pgproto3: copy what you keep.
//
// Direct wraps a client or backend socket for the hot path. On Linux it
// reads and writes the non-blocking socket with raw system calls and waits
// for readiness in Go's poller, so that a loopback write, which runs the
// receiver's TCP path inside the call, does not make the runtime hand the
// goroutine's processor to another thread (directconn_linux.go says why
// that mattered). Elsewhere, and for TLS, it is the connection itself.
package wire
