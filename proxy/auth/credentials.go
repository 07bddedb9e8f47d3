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
	// fromVerifier is true when the credentials were read from a verifier: pgowl knows no password.
	fromVerifier bool
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
		creds, err := newSCRAMCredentials(user, password, salt, SCRAMIterations)
		if err != nil {
			return nil, err
		}
		// The MD5 hash too, for an access rule that asks this user for md5.
		creds.md5Hash = md5Hex([]byte(password + user))
		return creds, nil
	case MethodMD5:
		if password == "" {
			return nil, fmt.Errorf("auth: user %q: empty password is not allowed for %s", user, method)
		}
		// A SCRAM verifier too, for an access rule that asks this user for SCRAM.
		creds, err := NewCredentials(user, password, MethodSCRAMSHA256)
		if err != nil {
			return nil, err
		}
		creds.method = MethodMD5
		creds.md5Hash = md5Hex([]byte(password + user))
		return creds, nil
	case MethodTrust:
		if password != "" {
			// Both secrets, for an access rule that asks this user for a password.
			creds, err := NewCredentials(user, password, MethodMD5)
			if err != nil {
				return nil, err
			}
			creds.method = MethodTrust
			return creds, nil
		}
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

// hasSCRAM reports whether the credentials hold a SCRAM-SHA-256 verifier.
func (c *Credentials) hasSCRAM() bool { return c.iterations > 0 }

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
	// lookup, when set, finds users not in users (see WithLookup).
	lookup func(user string) (*Credentials, bool)
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

// Lookup returns the credentials configured for user, or those the Store's lookup function finds.
func (s *Store) Lookup(user string) (*Credentials, bool) {
	if c, ok := s.users[user]; ok {
		return c, ok
	}
	if s.lookup != nil {
		return s.lookup(user)
	}
	return nil, false
}

// WithLookup returns a copy of s that asks lookup for users it does not hold, such as an auth
// query on the primary; lookup must be safe for concurrent use and bound its own time.
func (s *Store) WithLookup(lookup func(user string) (*Credentials, bool)) *Store {
	copied := *s
	copied.lookup = lookup
	return &copied
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
