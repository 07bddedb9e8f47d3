package config

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"strings"
)

// clientTLS checks the client TLS mode, its certificate needs, the TLS version and the cipher suites.
func (v *validator) clientTLS(t TLS) {
	v.oneOf("tls.client_mode", t.ClientMode, ClientTLSDisable, ClientTLSAllow, ClientTLSPrefer,
		ClientTLSRequire, ClientTLSVerifyCA, ClientTLSVerifyFull)
	switch t.ClientMode {
	case ClientTLSRequire, ClientTLSVerifyCA, ClientTLSVerifyFull:
		if t.CertFile == "" {
			v.fail("tls.client_mode", "%s needs tls.cert_file and tls.key_file", t.ClientMode)
		}
	}
	if (t.ClientMode == ClientTLSVerifyCA || t.ClientMode == ClientTLSVerifyFull) && t.ClientCAFile == "" {
		v.fail("tls.client_ca_file", "must be set when tls.client_mode is %s", t.ClientMode)
	}
	v.existingFile("tls.client_ca_file", t.ClientCAFile)
	v.oneOf("tls.min_version", t.MinVersion, TLSVersion12, TLSVersion13)
	for i, name := range t.CipherSuites {
		if _, ok := CipherSuiteID(name); !ok {
			v.fail(fmt.Sprintf("tls.cipher_suites[%d]", i), "%q is not a secure TLS 1.2 cipher suite Go knows", name)
		}
	}
}

// CipherSuiteID returns the ID of the secure TLS 1.2 cipher suite with the given IANA name.
func CipherSuiteID(name string) (uint16, bool) {
	for _, suite := range tls.CipherSuites() {
		if suite.Name == name && !suite.Insecure && versionSupported(suite, tls.VersionTLS12) {
			return suite.ID, true
		}
	}
	return 0, false
}

// versionSupported reports whether suite may be used with TLS version.
func versionSupported(suite *tls.CipherSuite, version uint16) bool {
	for _, supported := range suite.SupportedVersions {
		if supported == version {
			return true
		}
	}
	return false
}

// nodeTLS checks TLS settings towards the nodes (tls.nodes), or of the same kind under another
// key (peering.tls).
func (v *validator) nodeTLS(key string, n NodeTLS) {
	v.oneOf(key+".sslmode", n.SSLMode, SSLDisable, SSLPrefer, SSLRequire, SSLVerifyCA, SSLVerifyFull)
	switch {
	case n.CertFile != "" && n.KeyFile == "":
		v.fail(key+".key_file", "must be set when %s.cert_file is set", key)
	case n.CertFile == "" && n.KeyFile != "":
		v.fail(key+".cert_file", "must be set when %s.key_file is set", key)
	}
	v.existingFile(key+".ca_file", n.CAFile)
	v.existingFile(key+".cert_file", n.CertFile)
	v.existingFile(key+".key_file", n.KeyFile)
}

// auth checks the users file and the auth query settings.
func (v *validator) auth(a Auth) {
	v.existingFile("auth.users_file", a.UsersFile)
	if a.QueryEnabled {
		v.notEmpty("auth.query", a.Query)
		v.notEmpty("auth.query_user", a.QueryUser)
		v.notEmpty("auth.query_database", a.QueryDatabase)
	}
	v.notNegative("auth.cache_ttl", a.CacheTTL)
}

// access checks every access rule; the cert method needs client certificates to be verifiable.
func (v *validator) access(a Access, t TLS) {
	for i, rule := range a.Rules {
		prefix := fmt.Sprintf("access.rules[%d]", i)
		v.oneOf(prefix+".type", rule.Type, AccessHost, AccessHostSSL, AccessHostNoSSL)
		if _, err := ParseAddressRule(rule.Address); err != nil {
			v.fail(prefix+".address", "%q %v", rule.Address, err)
		}
		v.nameList(prefix+".database", rule.Database)
		v.nameList(prefix+".user", rule.User)
		v.oneOf(prefix+".method", rule.Method, AuthSCRAM, AuthMD5, AuthTrust, AuthCert, AuthReject)
		if rule.Method == AuthCert {
			if t.ClientCAFile == "" {
				v.fail(prefix+".method", "cert needs tls.client_ca_file")
			}
			if t.CertFile == "" || t.ClientMode == ClientTLSDisable {
				v.fail(prefix+".method", "cert needs client TLS: tls.cert_file, and tls.client_mode other than disable")
			}
			if rule.Type != AccessHostSSL {
				v.fail(prefix+".type", "must be hostssl when the method is cert")
			}
		}
	}
}

// nameList checks "all" or a comma-separated list of non-empty names.
func (v *validator) nameList(key, list string) {
	if list == "all" {
		return
	}
	for _, name := range strings.Split(list, ",") {
		if strings.TrimSpace(name) == "" {
			v.fail(key, "%q has an empty name; use \"all\" or name,name", list)
			return
		}
	}
}

// ParseAddressRule parses an access rule's address: "all" (nil prefix), a CIDR or a single IP address.
func ParseAddressRule(address string) (*netip.Prefix, error) {
	if address == "all" {
		return nil, nil
	}
	if strings.Contains(address, "/") {
		prefix, err := netip.ParsePrefix(address)
		if err != nil {
			return nil, fmt.Errorf("is not a CIDR such as 10.0.0.0/8")
		}
		if prefix.Masked() != prefix {
			return nil, fmt.Errorf("has bits set beyond its prefix length; write %s", prefix.Masked())
		}
		return &prefix, nil
	}
	ip, err := netip.ParseAddr(address)
	if err != nil {
		return nil, fmt.Errorf("is not \"all\", a CIDR or an IP address")
	}
	prefix := netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())
	return &prefix, nil
}
