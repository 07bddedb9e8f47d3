// Package auth authenticates clients on the server side of pgowl.
//
// pgowl does not forward a client's authentication to PostgreSQL. It checks the
// client itself against the users in its configuration and later logs in to
// each node with the same credentials through pgconn. This package does the
// first half: it plays the PostgreSQL server in the authentication phase that
// follows the StartupMessage.
//
// # Setup
//
// At configuration time, NewCredentials turns each user's plaintext password
// into what its method needs, and NewStore indexes the results. For
// SCRAM-SHA-256 that means a random 16-byte salt, 4096 iterations and the
// StoredKey and ServerKey of RFC 5802. The slow PBKDF2 runs once here, never
// per connection. For md5 it means md5hex(password+user). The plaintext is not
// kept. A Store is immutable; a configuration reload builds a new one.
//
// # Exchanges
//
// The proxy reads the StartupMessage, then calls Store.Authenticate with a Conn
// that sends backend messages and returns the bodies of the client's 'p'
// messages. The exchange depends on the user's method:
//
//	scram-sha-256 (default)
//	  -> AuthenticationSASL ["SCRAM-SHA-256"]
//	  <- SASLInitialResponse "SCRAM-SHA-256", client-first-message  "n,,n=,r=<cnonce>"
//	  -> AuthenticationSASLContinue  server-first-message  "r=<cnonce><snonce>,s=<salt>,i=4096"
//	  <- SASLResponse  client-final-message  "c=biws,r=<cnonce><snonce>,p=<proof>"
//	  -> AuthenticationSASLFinal  server-final-message  "v=<server signature>"
//	  -> AuthenticationOk
//	md5
//	  -> AuthenticationMD5Password <4 random bytes>
//	  <- PasswordMessage "md5" + md5hex(md5hex(password+user) + salt)
//	  -> AuthenticationOk
//	trust
//	  -> AuthenticationOk
//
// SCRAM follows PostgreSQL. On a TLS connection (Request.ChannelBinding set)
// SCRAM-SHA-256-PLUS is advertised first, then SCRAM-SHA-256; without TLS only
// SCRAM-SHA-256. With -PLUS the gs2 header must be "p=tls-server-end-point,,"
// and c= must carry it followed by the hash of pgowl's certificate (RFC 5929),
// so a client that binds cannot be relayed by someone in between. Without
// -PLUS the gs2 header "n,," is accepted, and so is "y,," (the client could
// bind but the server did not offer it) unless -PLUS was offered: that is a
// downgrade, refused as "SCRAM channel binding negotiation error". "p=..."
// with plain SCRAM is a protocol violation. An authorization identity ("a=") and mandatory
// extensions ("m=") are rejected as not supported. The user name in n= is
// ignored in favour of the startup user, just as PostgreSQL does. A
// SASLInitialResponse without data (length -1) gets an empty challenge, and
// the client-first-message then comes in the next message. Passwords go
// through SASLprep as in PostgreSQL's pg_saslprep. Nonces and salts come from
// the rnd argument, which is crypto/rand.Reader unless a test supplies one.
//
// # Requests
//
// AuthenticateRequest takes a Request: an access rule may override the user's
// method (md5 for a user known only by a SCRAM verifier runs SCRAM, as in
// PostgreSQL), and the cert method admits a user whose verified TLS
// certificate names it as common name (28000 otherwise). Its Result carries
// the ClientKey a SCRAM proof revealed, which SCRAM passthrough replays to a
// node holding the same verifier.
//
// # Result and errors
//
// On success Authenticate has already sent AuthenticationOk. The proxy goes on
// with ParameterStatus, BackendKeyData and ReadyForQuery. On failure it returns
// an *Error and sends nothing more. The proxy logs Error.Reason, sends
// Error.ErrorResponse (a FATAL message) and closes, so errors become wire
// messages in one place. Transport errors from Conn come back wrapped. The
// client-visible codes are:
//
//	28P01 password authentication failed for user "<name>"   wrong password or unknown user
//	08P01 malformed SCRAM message / invalid password packet size / ...   protocol violation
//	0A000 authorization identity or SCRAM extension not supported
//
// # Unknown users
//
// An unknown user gets a complete exchange that fails at the proof, with
// the same 28P01 message as a wrong password. The client cannot tell the two
// cases apart from the messages. The fake salt and keys are HMACs of the user
// name under a random per-Store secret, so repeated attempts for one name see
// the same salt, as they would for a real user. Only the log shows the
// difference: Reason is ReasonUnknownUser, not ReasonWrongPassword. When
// users of both SCRAM and md5 are configured, an unknown user meets md5 or
// SCRAM in the proportion of the configured users, chosen by a keyed hash of
// the name (unknown.go says why), so that the challenge type does not single
// out the users of the rarer method either. Trust users log in without a
// challenge: anyone may log in as them, so their existence is no secret.
//
// # Defences
//
// Proofs and hashes are compared in constant time. Bodies longer than
// MaxPasswordMessageLen are rejected, and Conn implementations should cap
// their reads at that size. Every malformed input produces an *Error, never a
// panic. FuzzSCRAMExchange exercises this.
package auth
