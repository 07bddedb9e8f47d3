package auth

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/bidi"
	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/rangetable"
)

// saslPrep normalises a password the way PostgreSQL's pg_saslprep does before
// building a SCRAM verifier (RFC 4013 SASLprep with the "stored strings"
// profile). Like PostgreSQL, it returns the password unchanged when it is pure
// ASCII, not valid UTF-8, or when SASLprep would reject it, so that any
// password can still be used byte for byte.
//
// The tables are those of RFC 3454. Unassigned code points are judged against
// Unicode 4.1 (the oldest table golang.org/x/text ships) instead of 3.2.
func saslPrep(password string) string {
	if isASCII(password) || !utf8.ValidString(password) {
		return password
	}

	// Step 1, mapping: non-ASCII spaces (C.1.2) become U+0020, characters
	// commonly mapped to nothing (B.1) disappear.
	var mapped strings.Builder
	mapped.Grow(len(password))
	for _, r := range password {
		switch {
		case isNonASCIISpace(r):
			mapped.WriteByte(' ')
		case isMappedToNothing(r):
		default:
			mapped.WriteRune(r)
		}
	}

	// Step 2, normalisation: Unicode NFKC.
	normalized := norm.NFKC.String(mapped.String())
	if normalized == "" {
		return password
	}

	// Steps 3 and 4: prohibited output, unassigned code points, bidi rules.
	assigned := rangetable.Assigned("4.1.0")
	hasRandAL, hasL := false, false
	for _, r := range normalized {
		if isNonASCIISpace(r) || isProhibited(r) {
			return password
		}
		if assigned != nil && !unicode.Is(assigned, r) {
			return password
		}
		switch bidiClass(r) {
		case bidi.R, bidi.AL:
			hasRandAL = true
		case bidi.L:
			hasL = true
		}
	}
	if hasRandAL {
		first, _ := utf8.DecodeRuneInString(normalized)
		last, _ := utf8.DecodeLastRuneInString(normalized)
		if hasL || !isRandAL(first) || !isRandAL(last) {
			return password
		}
	}
	return normalized
}

// isASCII reports whether s contains only 7-bit characters.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// bidiClass returns the bidirectional class of r.
func bidiClass(r rune) bidi.Class {
	props, _ := bidi.LookupRune(r)
	return props.Class()
}

// isRandAL reports whether r is a right-to-left character (RFC 3454 table D.1).
func isRandAL(r rune) bool {
	c := bidiClass(r)
	return c == bidi.R || c == bidi.AL
}

// isNonASCIISpace reports whether r is in RFC 3454 table C.1.2.
func isNonASCIISpace(r rune) bool {
	switch {
	case r == 0x00A0, r == 0x1680, r >= 0x2000 && r <= 0x200B,
		r == 0x202F, r == 0x205F, r == 0x3000:
		return true
	}
	return false
}

// isMappedToNothing reports whether r is in RFC 3454 table B.1.
func isMappedToNothing(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x1806, r >= 0x180B && r <= 0x180D,
		r >= 0x200B && r <= 0x200D, r == 0x2060, r >= 0xFE00 && r <= 0xFE0F,
		r == 0xFEFF:
		return true
	}
	return false
}

// isProhibited reports whether r is in RFC 3454 tables C.2.1 to C.9 as listed by RFC 4013 section 2.3.
func isProhibited(r rune) bool {
	switch {
	// C.2.1 ASCII control characters.
	case r <= 0x001F, r == 0x007F:
		return true
	// C.2.2 non-ASCII control characters.
	case r >= 0x0080 && r <= 0x009F, r == 0x06DD, r == 0x070F, r == 0x180E,
		r == 0x200C, r == 0x200D, r == 0x2028, r == 0x2029,
		r >= 0x2060 && r <= 0x2063, r >= 0x206A && r <= 0x206F, r == 0xFEFF,
		r >= 0xFFF9 && r <= 0xFFFC, r >= 0x1D173 && r <= 0x1D17A:
		return true
	// C.3 private use.
	case r >= 0xE000 && r <= 0xF8FF, r >= 0xF0000 && r <= 0xFFFFD,
		r >= 0x100000 && r <= 0x10FFFD:
		return true
	// C.4 non-character code points.
	case r >= 0xFDD0 && r <= 0xFDEF, r&0xFFFE == 0xFFFE:
		return true
	// C.5 surrogate codes.
	case r >= 0xD800 && r <= 0xDFFF:
		return true
	// C.6 inappropriate for plain text.
	case r >= 0xFFF9 && r <= 0xFFFD:
		return true
	// C.7 inappropriate for canonical representation.
	case r >= 0x2FF0 && r <= 0x2FFB:
		return true
	// C.8 change display properties or deprecated.
	case r == 0x0340, r == 0x0341, r == 0x200E, r == 0x200F,
		r >= 0x202A && r <= 0x202E:
		return true
	// C.9 tagging characters.
	case r == 0xE0001, r >= 0xE0020 && r <= 0xE007F:
		return true
	}
	return false
}
