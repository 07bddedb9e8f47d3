package config

import "time"

// Auth configures where client credentials come from besides the users list.
type Auth struct {
	// UsersFile is a file of "user" "verifier" lines in PgBouncer's userlist.txt format, each verifier a
	// SCRAM-SHA-256 secret as PostgreSQL stores it; empty reads no file.
	UsersFile string `yaml:"users_file" mapstructure:"users_file" help:"userlist.txt-style file of \"user\" \"SCRAM-SHA-256$...\" lines"`
	// QueryEnabled turns on the auth query: users found neither in users nor in UsersFile are looked up on the primary.
	QueryEnabled bool `yaml:"query_enabled" mapstructure:"query_enabled" help:"look unknown users' SCRAM verifiers up on the primary with auth.query"`
	// Query returns one row (user name, verifier) for the user name given as $1.
	Query string `yaml:"query" mapstructure:"query" help:"SQL returning (name, SCRAM verifier) for the user name $1"`
	// QueryUser is the login that runs Query on the primary.
	QueryUser string `yaml:"query_user" mapstructure:"query_user" help:"login that runs auth.query"`
	// QueryPassword is QueryUser's password; empty when the nodes trust it.
	QueryPassword string `yaml:"query_password" mapstructure:"query_password" help:"password of auth.query_user"`
	// QueryDatabase is the database Query runs in.
	QueryDatabase string `yaml:"query_database" mapstructure:"query_database" help:"database auth.query runs in"`
	// CacheTTL is how long a verifier read by Query is reused, a user found missing included; zero asks every time.
	CacheTTL time.Duration `yaml:"cache_ttl" mapstructure:"cache_ttl" help:"how long a verifier read by auth.query is reused, 0 never"`
}

// DefaultAuthQuery reads a role's verifier from pg_authid; it needs a superuser or a role allowed to read pg_authid.
const DefaultAuthQuery = "SELECT rolname, rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1 AND rolcanlogin"

// Access holds the access rules; with none, every configured user may log in from anywhere with its own auth method.
type Access struct {
	// Rules are tried in order; the first whose type, address, database and user match decides.
	// A login no rule matches is refused.
	Rules []AccessRule `yaml:"rules" mapstructure:"rules" help:"hba-style rules as a JSON list of {type, address, database, user, method}"`
}

// AccessRule is one hba-style rule.
type AccessRule struct {
	// Type is AccessHost (TLS or not), AccessHostSSL (TLS only) or AccessHostNoSSL (without TLS only).
	Type string `yaml:"type" mapstructure:"type"`
	// Address is a CIDR such as 10.0.0.0/8, a single IP address, or "all".
	Address string `yaml:"address" mapstructure:"address"`
	// Database is "all" or a comma-separated list of database names.
	Database string `yaml:"database" mapstructure:"database"`
	// User is "all" or a comma-separated list of user names.
	User string `yaml:"user" mapstructure:"user"`
	// Method is AuthSCRAM, AuthMD5, AuthTrust, AuthCert or AuthReject.
	Method string `yaml:"method" mapstructure:"method"`
}

// setDefaults fills the fields a list item of access.rules may omit.
func (r *AccessRule) setDefaults() {
	r.Type = AccessHost
	r.Address = "all"
	r.Database = "all"
	r.User = "all"
}

// Values of AccessRule.Type.
const (
	// AccessHost matches a client connection with or without TLS.
	AccessHost = "host"
	// AccessHostSSL matches a client connection that uses TLS.
	AccessHostSSL = "hostssl"
	// AccessHostNoSSL matches a client connection without TLS.
	AccessHostNoSSL = "hostnossl"
)

// Values of AccessRule.Method beyond the users' methods.
const (
	// AuthCert lets a client in whose TLS certificate, verified against tls.client_ca_file, names the user as its common name.
	AuthCert = "cert"
	// AuthReject refuses the login.
	AuthReject = "reject"
)

// Values of TLS.ClientMode.
const (
	// ClientTLSDisable answers every SSLRequest with N, even with a certificate configured.
	ClientTLSDisable = "disable"
	// ClientTLSAllow accepts TLS when the client asks for it and a certificate is configured.
	ClientTLSAllow = "allow"
	// ClientTLSPrefer is ClientTLSAllow: the server side cannot prefer more than accepting.
	ClientTLSPrefer = "prefer"
	// ClientTLSRequire refuses clients that log in without TLS.
	ClientTLSRequire = "require"
	// ClientTLSVerifyCA also requires a client certificate signed by tls.client_ca_file.
	ClientTLSVerifyCA = "verify-ca"
	// ClientTLSVerifyFull also requires the certificate's common name to be the user name.
	ClientTLSVerifyFull = "verify-full"
)

// Values of TLS.MinVersion.
const (
	// TLSVersion12 accepts TLS 1.2 and 1.3.
	TLSVersion12 = "1.2"
	// TLSVersion13 accepts TLS 1.3 only.
	TLSVersion13 = "1.3"
)

// Values of NodeTLS.SSLMode, with libpq's meaning.
const (
	// SSLDisable never uses TLS to the nodes.
	SSLDisable = "disable"
	// SSLPrefer uses TLS when the node offers it, without checking its certificate, and plain TCP otherwise.
	SSLPrefer = "prefer"
	// SSLRequire uses TLS always, without checking the node's certificate.
	SSLRequire = "require"
	// SSLVerifyCA uses TLS and checks that a trusted CA signed the node's certificate.
	SSLVerifyCA = "verify-ca"
	// SSLVerifyFull also checks that the certificate names the node's host.
	SSLVerifyFull = "verify-full"
)
