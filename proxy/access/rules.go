package access

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/pgowl/pgowl/config"
)

// Method is what a matching rule asks of the client.
type Method uint8

const (
	// MethodUser is the method the user is configured with; it is decided when there are no rules.
	MethodUser Method = iota
	// MethodSCRAM asks for SCRAM-SHA-256 (or SCRAM-SHA-256-PLUS over TLS).
	MethodSCRAM
	// MethodMD5 asks for an MD5 password, or SCRAM for a user pgowl knows only by its SCRAM verifier.
	MethodMD5
	// MethodTrust lets the client in without a password.
	MethodTrust
	// MethodCert lets the client in when its verified TLS certificate's common name is the user name.
	MethodCert
	// MethodReject refuses the login.
	MethodReject
)

// String returns the configuration spelling of m.
func (m Method) String() string {
	switch m {
	case MethodUser:
		return "user"
	case MethodSCRAM:
		return config.AuthSCRAM
	case MethodMD5:
		return config.AuthMD5
	case MethodTrust:
		return config.AuthTrust
	case MethodCert:
		return config.AuthCert
	case MethodReject:
		return config.AuthReject
	}
	return fmt.Sprintf("Method(%d)", uint8(m))
}

// Login is what a rule is matched against.
type Login struct {
	// Addr is the client's IP address.
	Addr netip.Addr
	// TLS is true when the client's connection uses TLS.
	TLS bool
	// Database and User are from the startup packet.
	Database string
	User     string
}

// Decision is the outcome of Decide.
type Decision struct {
	// Method is what the client must pass, or MethodReject.
	Method Method
	// Rule is the index in access.rules of the deciding rule, -1 when there are no rules or none matched.
	Rule int
}

// Rules are compiled access rules; the zero value has none and admits every login with MethodUser.
type Rules struct {
	rules []rule
}

// rule is one compiled access rule.
type rule struct {
	connection string        // config.AccessHost, AccessHostSSL or AccessHostNoSSL
	prefix     *netip.Prefix // nil matches every address
	databases  map[string]bool
	users      map[string]bool // nil matches every user
	method     Method
}

// Compile turns the configured rules into Rules; the configuration must have passed Validate.
func Compile(configured []config.AccessRule) (*Rules, error) {
	r := &Rules{}
	for i, c := range configured {
		prefix, err := config.ParseAddressRule(c.Address)
		if err != nil {
			return nil, fmt.Errorf("access.rules[%d].address: %q %w", i, c.Address, err)
		}
		method, err := parseMethod(c.Method)
		if err != nil {
			return nil, fmt.Errorf("access.rules[%d].method: %w", i, err)
		}
		r.rules = append(r.rules, rule{connection: c.Type, prefix: prefix, databases: nameSet(c.Database),
			users: nameSet(c.User), method: method})
	}
	return r, nil
}

// parseMethod converts a rule's method spelling.
func parseMethod(name string) (Method, error) {
	for _, m := range []Method{MethodSCRAM, MethodMD5, MethodTrust, MethodCert, MethodReject} {
		if m.String() == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%q is not one of scram-sha-256, md5, trust, cert, reject", name)
}

// nameSet returns the names of a comma-separated list, or nil for "all".
func nameSet(list string) map[string]bool {
	if list == "all" {
		return nil
	}
	set := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		set[strings.TrimSpace(name)] = true
	}
	return set
}

// Empty reports whether there are no rules, so that every login keeps its user's method.
func (r *Rules) Empty() bool { return r == nil || len(r.rules) == 0 }

// Decide returns the first matching rule's method; a login no rule matches is rejected.
func (r *Rules) Decide(l Login) Decision {
	if r.Empty() {
		return Decision{Method: MethodUser, Rule: -1}
	}
	addr := l.Addr.Unmap()
	for i, rule := range r.rules {
		switch {
		case rule.connection == config.AccessHostSSL && !l.TLS,
			rule.connection == config.AccessHostNoSSL && l.TLS,
			rule.prefix != nil && !rule.prefix.Contains(addr),
			rule.databases != nil && !rule.databases[l.Database],
			rule.users != nil && !rule.users[l.User]:
			continue
		}
		return Decision{Method: rule.method, Rule: i}
	}
	return Decision{Method: MethodReject, Rule: -1}
}
