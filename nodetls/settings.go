package nodetls

import (
	"strings"

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
}

// FromConfig returns the settings of the tls.nodes section.
func FromConfig(cfg config.NodeTLS) Settings {
	return Settings{SSLMode: cfg.SSLMode, CAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile}
}

// Param is one libpq connection keyword and its value.
type Param struct {
	Key   string
	Value string
}

// Params returns the libpq keywords that apply the settings; unset files are left out.
func (s Settings) Params() []Param {
	mode := s.SSLMode
	if mode == "" {
		mode = config.SSLPrefer
	}
	params := []Param{{"sslmode", mode}}
	for _, p := range []Param{{"sslrootcert", s.CAFile}, {"sslcert", s.CertFile}, {"sslkey", s.KeyFile}} {
		if p.Value != "" {
			params = append(params, p)
		}
	}
	return params
}

// ConnString renders params, then the settings' keywords, as a keyword/value connection string
// with every value quoted; empty values are left out.
func (s Settings) ConnString(params ...Param) string {
	var b strings.Builder
	quote := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	for _, p := range append(params, s.Params()...) {
		if p.Value == "" {
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
