package auth

import "testing"

// TestSASLPrep checks the RFC 4013 section 3 examples and PostgreSQL's fall-back to the raw password.
func TestSASLPrep(t *testing.T) {
	tests := []struct {
		name     string
		password string
		want     string
	}{
		// RFC 4013 section 3.
		{name: "soft hyphen mapped to nothing", password: "I\u00ADX", want: "IX"},
		{name: "plain lower case", password: "user", want: "user"},
		{name: "case preserved", password: "USER", want: "USER"},
		{name: "NFKC of feminine ordinal", password: "\u00AA", want: "a"},
		{name: "NFKC of roman numeral nine", password: "\u2168", want: "IX"},
		{name: "prohibited bell character kept raw", password: "\u0007", want: "\u0007"},
		{name: "bidi violation kept raw", password: "\u0627\u0031", want: "\u0627\u0031"},
		// PostgreSQL behaviour around the RFC.
		{name: "ASCII is never changed", password: "p\x01ss word", want: "p\x01ss word"},
		{name: "non-ASCII space mapped to space", password: "pass\u00A0word", want: "pass word"},
		{name: "ideographic space mapped to space", password: "pass\u3000word", want: "pass word"},
		{name: "zero width space mapped to space", password: "a\u200Bb", want: "a b"},
		{name: "zero width joiner mapped to nothing", password: "a\u200Db\u00E9", want: "ab\u00E9"},
		{name: "combining sequence composed", password: "e\u0301t\u00E9", want: "\u00E9t\u00E9"},
		{name: "invalid UTF-8 kept raw", password: "pa\xffss\u00E9", want: "pa\xffss\u00E9"},
		{name: "only mapped-to-nothing characters kept raw", password: "\u00AD\u00AD", want: "\u00AD\u00AD"},
		{name: "private use kept raw", password: "pw\uE000\u00E9", want: "pw\uE000\u00E9"},
		{name: "non-character kept raw", password: "pw\uFFFE\u00E9", want: "pw\uFFFE\u00E9"},
		{name: "tagging character kept raw", password: "pw\U000E0041\u00E9", want: "pw\U000E0041\u00E9"},
		{name: "unassigned code point kept raw", password: "pw\u0378\u00E9", want: "pw\u0378\u00E9"},
		{name: "right-to-left only is allowed", password: "\u0627\u0628", want: "\u0627\u0628"},
		{name: "right-to-left mixed with left-to-right kept raw", password: "\u0627a\u0628", want: "\u0627a\u0628"},
		{name: "left-to-right with accents", password: "caf\u00E9", want: "caf\u00E9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := saslPrep(tt.password); got != tt.want {
				t.Fatalf("saslPrep(%+q) = %+q, want %+q", tt.password, got, tt.want)
			}
		})
	}
}
