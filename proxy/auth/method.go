package auth

import (
	"fmt"
	"strings"
)

// Method is the way a configured user proves its identity to pgowl.
type Method uint8

const (
	// MethodSCRAMSHA256 is SASL SCRAM-SHA-256 without channel binding; it is the zero value and the default.
	MethodSCRAMSHA256 Method = iota
	// MethodMD5 is PostgreSQL's salted MD5 challenge; it needs the user name and password only at configuration time.
	MethodMD5
	// MethodTrust accepts the user without any password exchange.
	MethodTrust
	// MethodCert accepts the user whose verified TLS client certificate names it as common name;
	// only an access rule asks for it.
	MethodCert
)

// DefaultMethod is the method used when the configuration names none, and for the fake exchange with unknown users.
const DefaultMethod = MethodSCRAMSHA256

// String returns the configuration spelling of m, as accepted by ParseMethod.
func (m Method) String() string {
	switch m {
	case MethodSCRAMSHA256:
		return "scram-sha-256"
	case MethodMD5:
		return "md5"
	case MethodTrust:
		return "trust"
	case MethodCert:
		return "cert"
	default:
		return fmt.Sprintf("Method(%d)", uint8(m))
	}
}

// MarshalText encodes m as its configuration spelling so that it serialises in JSON and YAML.
func (m Method) MarshalText() ([]byte, error) {
	switch m {
	case MethodSCRAMSHA256, MethodMD5, MethodTrust, MethodCert:
		return []byte(m.String()), nil
	default:
		return nil, fmt.Errorf("auth: cannot marshal unknown method %d", uint8(m))
	}
}

// UnmarshalText decodes a configuration spelling with the same rules as ParseMethod.
func (m *Method) UnmarshalText(text []byte) error {
	parsed, err := ParseMethod(string(text))
	if err != nil {
		return err
	}
	*m = parsed
	return nil
}

// ParseMethod converts a configuration value ("scram-sha-256", "md5" or "trust", any case) into a Method.
func ParseMethod(s string) (Method, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "scram-sha-256":
		return MethodSCRAMSHA256, nil
	case "md5":
		return MethodMD5, nil
	case "trust":
		return MethodTrust, nil
	default:
		return 0, fmt.Errorf("auth: unknown authentication method %q (want scram-sha-256, md5 or trust)", s)
	}
}
