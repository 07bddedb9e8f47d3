package auth

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// scramVerifierPrefix starts a SCRAM-SHA-256 secret as PostgreSQL stores it in pg_authid.rolpassword.
const scramVerifierPrefix = "SCRAM-SHA-256$"

// NewVerifierCredentials builds SCRAM-SHA-256 credentials for user from a verifier in PostgreSQL's
// format, "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>" with base64 salt and keys.
// pgowl never learns the password: clients are checked against the StoredKey, and the ClientKey
// their proof reveals logs in to a node holding the same verifier (SCRAM passthrough).
func NewVerifierCredentials(user, verifier string) (*Credentials, error) {
	if user == "" {
		return nil, fmt.Errorf("auth: user name is empty")
	}
	rest, ok := strings.CutPrefix(verifier, scramVerifierPrefix)
	if !ok {
		return nil, fmt.Errorf("auth: user %q: the secret is not a SCRAM-SHA-256 verifier (it must start with %s)", user, scramVerifierPrefix)
	}
	iterationsAndSalt, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return nil, fmt.Errorf("auth: user %q: SCRAM verifier has no $ between salt and keys", user)
	}
	iterationsText, saltText, ok := strings.Cut(iterationsAndSalt, ":")
	if !ok {
		return nil, fmt.Errorf("auth: user %q: SCRAM verifier has no : between iterations and salt", user)
	}
	iterations, err := strconv.Atoi(iterationsText)
	if err != nil || iterations < 1 {
		return nil, fmt.Errorf("auth: user %q: SCRAM verifier has iteration count %q, want a positive number", user, iterationsText)
	}
	salt, err := base64.StdEncoding.DecodeString(saltText)
	if err != nil || len(salt) == 0 {
		return nil, fmt.Errorf("auth: user %q: SCRAM verifier's salt is not base64", user)
	}
	storedText, serverText, ok := strings.Cut(keys, ":")
	if !ok {
		return nil, fmt.Errorf("auth: user %q: SCRAM verifier has no : between StoredKey and ServerKey", user)
	}
	creds := &Credentials{user: user, method: MethodSCRAMSHA256, salt: salt, iterations: iterations, fromVerifier: true}
	for _, key := range []struct {
		text string
		into *[sha256.Size]byte
		name string
	}{{storedText, &creds.storedKey, "StoredKey"}, {serverText, &creds.serverKey, "ServerKey"}} {
		decoded, err := base64.StdEncoding.DecodeString(key.text)
		if err != nil || len(decoded) != sha256.Size {
			return nil, fmt.Errorf("auth: user %q: SCRAM verifier's %s is not %d bytes in base64", user, key.name, sha256.Size)
		}
		copy(key.into[:], decoded)
	}
	return creds, nil
}

// Verifier returns the credentials' SCRAM-SHA-256 verifier in PostgreSQL's format, "" without one.
func (c *Credentials) Verifier() string {
	if !c.hasSCRAM() {
		return ""
	}
	return scramVerifierPrefix + strconv.Itoa(c.iterations) + ":" + base64.StdEncoding.EncodeToString(c.salt) + "$" +
		base64.StdEncoding.EncodeToString(c.storedKey[:]) + ":" + base64.StdEncoding.EncodeToString(c.serverKey[:])
}

// FromVerifier reports whether the credentials came from a verifier, so that pgowl knows no password for the user.
func (c *Credentials) FromVerifier() bool { return c.fromVerifier }

// ServerKey returns the SCRAM ServerKey, which checks a node's signature during SCRAM passthrough.
func (c *Credentials) ServerKey() [sha256.Size]byte { return c.serverKey }

// ParseUserList reads a users file in PgBouncer's userlist.txt format: one user a line, as two
// double-quoted strings, the name and its SCRAM-SHA-256 verifier ("" inside a string is a quote).
// Empty lines and lines starting with ; or # are comments. name says where the file is, for errors.
func ParseUserList(r io.Reader, name string) ([]*Credentials, error) {
	var creds []*Credentials
	seen := map[string]int{}
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, 4096), 1<<20)
	for lineNumber := 1; scanner.Scan(); lineNumber++ {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		fields, err := quotedFields(line)
		if err != nil || len(fields) != 2 {
			if err == nil {
				err = fmt.Errorf("%d quoted strings, want 2", len(fields))
			}
			return nil, fmt.Errorf("auth: %s:%d: want \"user\" \"SCRAM-SHA-256$...\": %w", name, lineNumber, err)
		}
		if first, twice := seen[fields[0]]; twice {
			return nil, fmt.Errorf("auth: %s:%d: user %q is already on line %d", name, lineNumber, fields[0], first)
		}
		seen[fields[0]] = lineNumber
		c, err := NewVerifierCredentials(fields[0], fields[1])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, lineNumber, err)
		}
		creds = append(creds, c)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("auth: read %s: %w", name, err)
	}
	return creds, nil
}

// quotedFields splits a line into double-quoted strings separated by blanks; "" inside one is a quote.
func quotedFields(line string) ([]string, error) {
	var fields []string
	for i := 0; i < len(line); {
		switch line[i] {
		case ' ', '\t':
			i++
			continue
		case '"':
		default:
			return nil, fmt.Errorf("unquoted text at column %d", i+1)
		}
		var b strings.Builder
		i++
		for {
			if i >= len(line) {
				return nil, fmt.Errorf("unterminated quoted string")
			}
			if line[i] == '"' {
				if i+1 < len(line) && line[i+1] == '"' {
					b.WriteByte('"')
					i += 2
					continue
				}
				i++
				break
			}
			b.WriteByte(line[i])
			i++
		}
		fields = append(fields, b.String())
	}
	return fields, nil
}
