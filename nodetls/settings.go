package nodetls

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/config"
)

// Settings is how every connection to a node is secured; the zero value is sslmode=prefer.
type Settings struct {
	// SSLMode is libpq's sslmode: disable, prefer, require, verify-ca or verify-full.
	SSLMode string
	// CAFile is the PEM file of CAs that sign the nodes' certificates (libpq's sslrootcert).
	CAFile string
	// CertFile and KeyFile are the client certificate and key presented to the nodes (sslcert, sslkey).
	CertFile string
	KeyFile  string
	// Toward names what the settings secure, and Key their configuration section, in the
	// errors they cause: "" is "node" and "tls.nodes".
	Toward, Key string
	// AnswerWait, when set, bounds the wait for the answer to SSLRequest (DialCancel, Apply):
	// past it, when it ends before the dial's own deadline, the dial fails with ErrNoSSLAnswer
	// (a peer of a version that does not read one).
	AnswerWait time.Duration
}

// FromConfig returns the settings of the tls.nodes section.
func FromConfig(cfg config.NodeTLS) Settings {
	return Settings{SSLMode: cfg.SSLMode, CAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile}
}

// ForPeers returns the settings of the peering.tls section: the cancels passed on to other pgowl
// instances' peering listeners are secured as cancels to the nodes are (DialCancel).
func ForPeers(cfg config.PeerTLS) Settings {
	s := FromConfig(config.NodeTLS(cfg))
	s.Toward, s.Key = "peer", "peering.tls"
	return s
}

// toward returns what the settings secure and their section, for errors.
func (s Settings) toward() (what, key string) {
	what, key = s.Toward, s.Key
	if what == "" {
		what = "node"
	}
	if key == "" {
		key = "tls.nodes"
	}
	return what, key
}

// Check reads the files the settings name as a dial would, so that a file that cannot be read
// or holds no certificate or key is found before the first connection needs it.
func (s Settings) Check() error {
	if s.SSLMode == config.SSLDisable {
		return nil // no dial reads them
	}
	if _, err := pgconn.ParseConfig(s.ConnString(Param{Key: "host", Value: "localhost"})); err != nil {
		_, key := s.toward()
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// Param is one libpq connection keyword and its value. Explicit renders it even when Value is
// empty: an empty value then overrides what the environment or a default file would give.
type Param struct {
	Key      string
	Value    string
	Explicit bool
}

// Params returns the libpq keywords that apply the settings. The files are given even when unset
// (empty), sslcertmode is allow (a client certificate is sent when the server asks for one),
// sslnegotiation is postgres (an SSLRequest first), and target_session_attrs is any: pgconn, as
// libpq, otherwise takes them from PG* environment variables (PGSSLROOTCERT, PGSSLCERTMODE,
// PGSSLNEGOTIATION, PGTARGETSESSIONATTRS, ...) or from ~/.postgresql (root.crt,
// postgresql.crt), and pgowl's connections to the nodes must depend on its configuration alone
// (tls.nodes: system roots when ca_file is empty, no client certificate without cert_file; every
// node reachable, whatever its role). PGSERVICE and PGSERVICEFILE still apply: pgconn has no
// way to turn a service lookup off.
func (s Settings) Params() []Param {
	mode := s.SSLMode
	if mode == "" {
		mode = config.SSLPrefer
	}
	return []Param{{Key: "sslmode", Value: mode}, {Key: "sslrootcert", Value: s.CAFile, Explicit: true},
		{Key: "sslcert", Value: s.CertFile, Explicit: true}, {Key: "sslkey", Value: s.KeyFile, Explicit: true},
		{Key: "sslcertmode", Value: "allow"}, {Key: "sslnegotiation", Value: "postgres"},
		{Key: "target_session_attrs", Value: "any"}}
}

// ConnString renders params, then the settings' keywords, as a keyword/value connection string
// with every value quoted; empty values are left out unless Explicit.
func (s Settings) ConnString(params ...Param) string {
	var b strings.Builder
	quote := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	for _, p := range append(params, s.Params()...) {
		if p.Value == "" && !p.Explicit {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.Key)
		b.WriteString("='")
		b.WriteString(quote.Replace(p.Value))
		b.WriteByte('\'')
	}
	return b.String()
}
