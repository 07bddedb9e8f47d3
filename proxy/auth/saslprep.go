package auth

import (
	"strings"
	"unicode/utf8"

	"github.com/xdg-go/stringprep"
)

// saslPrep normalises a password the way PostgreSQL's pg_saslprep does before
// building a SCRAM verifier: RFC 4013 SASLprep (github.com/xdg-go/stringprep,
// with RFC 3454's Unicode 3.2 tables), with PostgreSQL's exceptions around it.
// Like PostgreSQL, it returns the password unchanged when it is pure ASCII,
// not valid UTF-8, or when SASLprep would reject it or map it to nothing, so
// that any password can still be used byte for byte.
func saslPrep(password string) string {
	if isASCII(password) || !utf8.ValidString(password) {
		return password
	}
	// U+200B ZERO WIDTH SPACE is both a non-ASCII space (RFC 3454 C.1.2) and
	// mapped to nothing (B.1). PostgreSQL (and libpq, which prepares the
	// client's side) applies the space mapping first; the library the other.
	prepared, err := stringprep.SASLprep.Prepare(strings.ReplaceAll(password, "\u200B", " "))
	if err != nil || prepared == "" {
		return password
	}
	return prepared
}

// isASCII reports whether s holds only 7-bit characters, which SASLprep never changes in PostgreSQL.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
