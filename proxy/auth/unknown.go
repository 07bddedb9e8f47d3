package auth

import (
	"encoding/binary"
	"encoding/hex"
	"io"
)

// # Unknown users and the challenge they see
//
// The challenge a login meets must not tell whether its user exists. With
// one method for every configured user that is easy: an unknown user gets
// that method's challenge and a fake exchange that fails like a wrong
// password. With users of both SCRAM and md5 (trust users are left out:
// anyone may log in as them, their existence is no secret), one fixed method
// for unknown users would single out every user of the other one. So an
// unknown user gets md5 or SCRAM in the proportion of the configured users,
// chosen by a keyed hash of the name: the same name always meets the same
// challenge, as a real user does, and seeing md5 (or SCRAM) for a name says
// nothing about whether it exists. The fake exchanges compute only HMACs and
// hashes, as the real ones do (the real SCRAM keys are derived at start-up),
// so a failed login costs the same whatever the user and the method.

// methodCounts counts the configured SCRAM and md5 users, for the method
// unknown users see.
func (s *Store) methodCounts() (scram, md5 int) {
	for _, c := range s.users {
		switch c.method {
		case MethodSCRAMSHA256:
			scram++
		case MethodMD5:
			md5++
		}
	}
	return scram, md5
}

// fakeMethod is the method an unknown user's login meets: md5 for a share
// of names equal to the md5 users' share of the configured users, SCRAM
// otherwise (and with no md5 user at all).
func (s *Store) fakeMethod(user string) Method {
	scram, md5 := s.scramUsers, s.md5Users
	if md5 == 0 {
		return MethodSCRAMSHA256
	}
	if scram == 0 {
		return MethodMD5
	}
	pick := hmacSHA256(s.fakeSecret[:], "method\x00"+user)
	if binary.BigEndian.Uint64(pick[:8])%uint64(scram+md5) < uint64(md5) {
		return MethodMD5
	}
	return MethodSCRAMSHA256
}

// fakeMD5Credentials returns md5 credentials for an unknown user that match
// no password: the hash is a keyed HMAC of the name, not of any password.
func (s *Store) fakeMD5Credentials(user string) *Credentials {
	hash := hmacSHA256(s.fakeSecret[:], "md5\x00"+user)
	return &Credentials{user: user, method: MethodMD5, md5Hash: hex.EncodeToString(hash[:16]), unknown: true}
}

// authenticateUnknown runs the fake exchange of an unknown user and fails as a
// wrong password (or a refused certificate) does. The challenge is the one an
// access rule's method asks everyone for, or else the one fakeMethod picks.
func (s *Store) authenticateUnknown(c Conn, r Request, rnd io.Reader) error {
	method := s.fakeMethod(r.User)
	if r.Override {
		method = r.Method
	}
	switch method {
	case MethodCert:
		return certificateFailed(r.User, ReasonUnknownUser)
	case MethodMD5:
		return authenticateMD5(c, s.fakeMD5Credentials(r.User), rnd)
	}
	_, err := authenticateSCRAM(c, s.fakeCredentials(r.User), r.ChannelBinding, rnd, true)
	return err
}

// failureReason is the log's reason for a failed password check.
func (c *Credentials) failureReason() string {
	if c.unknown {
		return ReasonUnknownUser
	}
	return ReasonWrongPassword
}
