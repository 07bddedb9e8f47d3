package auth

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

const (
	// SCRAMIterations is the PBKDF2 iteration count of SCRAM verifiers, PostgreSQL's default.
	SCRAMIterations = 4096
	// SCRAMSaltLen is the length in bytes of the random salt of each SCRAM verifier, as in PostgreSQL.
	SCRAMSaltLen = 16
)

// Credentials is the precomputed secret of one configured user, built once at configuration time.
//
// The plaintext password is not kept: SCRAM credentials hold the salt, iteration
// count, StoredKey and ServerKey (RFC 5802), MD5 credentials hold
// md5hex(password+user). Credentials are immutable and safe for concurrent use.
type Credentials struct {
	user   string
	method Method

	// SCRAM-SHA-256 verifier.
	salt       []byte
	iterations int
	storedKey  [sha256.Size]byte
	serverKey  [sha256.Size]byte

	// md5hex(password + user), the value PostgreSQL stores for md5 users.
	md5Hash string
	// unknown marks the fake credentials of a user who is not configured.
	unknown bool
}

// NewCredentials derives the secret for user from password for the given method; for SCRAM it runs PBKDF2 once with a fresh random salt.
func NewCredentials(user, password string, method Method) (*Credentials, error) {
	if user == "" {
		return nil, errors.New("auth: user name is empty")
	}
	switch method {
	case MethodSCRAMSHA256:
		if password == "" {
			return nil, fmt.Errorf("auth: user %q: empty password is not allowed for %s", user, method)
		}
		salt := make([]byte, SCRAMSaltLen)
		if _, err := rand.Read(salt); err != nil {
			return nil, fmt.Errorf("auth: user %q: generate salt: %w", user, err)
		}
		return newSCRAMCredentials(user, password, salt, SCRAMIterations)
	case MethodMD5:
		if password == "" {
			return nil, fmt.Errorf("auth: user %q: empty password is not allowed for %s", user, method)
		}
		return &Credentials{user: user, method: MethodMD5, md5Hash: md5Hex([]byte(password + user))}, nil
	case MethodTrust:
		return &Credentials{user: user, method: MethodTrust}, nil
	default:
		return nil, fmt.Errorf("auth: user %q: unknown method %d", user, uint8(method))
	}
}

// newSCRAMCredentials builds a SCRAM-SHA-256 verifier with a given salt and iteration count.
func newSCRAMCredentials(user, password string, salt []byte, iterations int) (*Credentials, error) {
	if len(salt) == 0 {
		return nil, errors.New("auth: SCRAM salt is empty")
	}
	if iterations < 1 {
		return nil, fmt.Errorf("auth: SCRAM iteration count %d is not positive", iterations)
	}
	saltedPassword, err := pbkdf2.Key(sha256.New, saslPrep(password), salt, iterations, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("auth: user %q: derive SCRAM key: %w", user, err)
	}
	clientKey := hmacSHA256(saltedPassword, "Client Key")
	creds := &Credentials{
		user:       user,
		method:     MethodSCRAMSHA256,
		salt:       append([]byte(nil), salt...),
		iterations: iterations,
		storedKey:  sha256.Sum256(clientKey[:]),
		serverKey:  hmacSHA256(saltedPassword, "Server Key"),
	}
	return creds, nil
}

// User returns the configured user name the credentials belong to.
func (c *Credentials) User() string { return c.user }

// Method returns the authentication method the user must pass.
func (c *Credentials) Method() Method { return c.method }

// hmacSHA256 computes HMAC-SHA-256(key, message).
func hmacSHA256(key []byte, message string) [sha256.Size]byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(message))
	var sum [sha256.Size]byte
	mac.Sum(sum[:0])
	return sum
}

// md5Hex returns the lower-case hex MD5 digest of data, the building block of PostgreSQL's md5 method.
func md5Hex(data []byte) string {
	sum := md5.Sum(data)
	return hex.EncodeToString(sum[:])
}

// Store holds the credentials of all configured users and answers authentication for a connection.
//
// A Store is immutable after NewStore and safe for concurrent use; build a new
// one to apply a configuration reload.
type Store struct {
	users map[string]*Credentials
	// fakeSecret keys the deterministic fake SCRAM verifier shown to unknown users.
	fakeSecret [32]byte
	// scramUsers and md5Users count the configured users of each method (see fakeMethod).
	scramUsers, md5Users int
}

// NewStore indexes creds by user name; nil entries are skipped and a later duplicate replaces an earlier one.
func NewStore(creds ...*Credentials) *Store {
	s := &Store{users: make(map[string]*Credentials, len(creds))}
	for _, c := range creds {
		if c != nil {
			s.users[c.user] = c
		}
	}
	// crypto/rand.Read never fails on supported platforms (Go 1.24+).
	_, _ = rand.Read(s.fakeSecret[:])
	s.scramUsers, s.md5Users = s.methodCounts()
	return s
}

// Lookup returns the credentials configured for user.
func (s *Store) Lookup(user string) (*Credentials, bool) {
	c, ok := s.users[user]
	return c, ok
}

// fakeCredentials returns a SCRAM verifier for an unknown user that looks real and stable but matches no password.
//
// The salt is derived from the user name and the Store's secret, so repeated
// attempts with the same name see the same salt, as they would for a real
// user, and names cannot be probed by comparing salts across Stores. The keys
// come from the same secret, so no password is known to match; the exchange
// is failed regardless. Only HMACs are computed, never PBKDF2, so the fake path
// costs about what a configured user costs.
func (s *Store) fakeCredentials(user string) *Credentials {
	salt := hmacSHA256(s.fakeSecret[:], "salt\x00"+user)
	return &Credentials{
		user:       user,
		method:     MethodSCRAMSHA256,
		salt:       salt[:SCRAMSaltLen],
		iterations: SCRAMIterations,
		storedKey:  hmacSHA256(s.fakeSecret[:], "stored-key\x00"+user),
		serverKey:  hmacSHA256(s.fakeSecret[:], "server-key\x00"+user),
	}
}
