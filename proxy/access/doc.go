// Package access decides, from hba-style rules, whether a client may log in
// and which authentication method it must pass.
//
// A Rules value is compiled once from the access.rules section of the
// configuration. Each rule matches on four facts about a login: the client's
// address (a CIDR, or all), whether the connection uses TLS (host matches
// both, hostssl only TLS, hostnossl only plain TCP), the database and the
// user (all, or a list of names). Rules are tried in order and the first
// that matches decides, as in PostgreSQL's pg_hba.conf: its method is one of
// scram-sha-256, md5, trust, cert, or reject. A login that no rule matches
// is refused.
//
// With no rules at all, Decide lets every login through with the method the
// user is configured with (MethodUser); this keeps configurations written
// before access rules existed working as they did.
//
// Decisions are values: a Decision names the method and the rule (its index
// in the configuration, or -1) so that the log can say which rule admitted
// or refused a login.
package access
