package auth

import (
	"strings"
	"testing"
)

// TestParseMethod checks the accepted spellings and that String and text marshalling round-trip.
func TestParseMethod(t *testing.T) {
	tests := []struct {
		in      string
		want    Method
		wantErr bool
	}{
		{in: "scram-sha-256", want: MethodSCRAMSHA256},
		{in: "SCRAM-SHA-256", want: MethodSCRAMSHA256},
		{in: " md5 ", want: MethodMD5},
		{in: "trust", want: MethodTrust},
		{in: "", wantErr: true},
		{in: "password", wantErr: true},
		{in: "scram-sha-256-plus", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseMethod(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseMethod(%q) = %v, want error", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseMethod(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			text, err := got.MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			var back Method
			if err := back.UnmarshalText(text); err != nil || back != got || string(text) != got.String() {
				t.Fatalf("round trip of %v via %q gave %v, %v", got, text, back, err)
			}
		})
	}
	if DefaultMethod != MethodSCRAMSHA256 || Method(0) != DefaultMethod {
		t.Fatal("the zero Method must be the SCRAM-SHA-256 default")
	}
	if _, err := Method(42).MarshalText(); err == nil || !strings.Contains(Method(42).String(), "42") {
		t.Fatal("unknown methods must not marshal and must print their number")
	}
}

// TestNewCredentials checks input validation and what each method precomputes.
func TestNewCredentials(t *testing.T) {
	tests := []struct {
		name     string
		user     string
		password string
		method   Method
		wantErr  bool
	}{
		{name: "scram", user: "u", password: "p", method: MethodSCRAMSHA256},
		{name: "md5", user: "u", password: "p", method: MethodMD5},
		{name: "trust without password", user: "u", method: MethodTrust},
		{name: "empty user", password: "p", method: MethodSCRAMSHA256, wantErr: true},
		{name: "scram empty password", user: "u", method: MethodSCRAMSHA256, wantErr: true},
		{name: "md5 empty password", user: "u", method: MethodMD5, wantErr: true},
		{name: "unknown method", user: "u", password: "p", method: Method(9), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCredentials(tt.user, tt.password, tt.method)
			if tt.wantErr {
				if err == nil {
					t.Fatal("want error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.User() != tt.user || c.Method() != tt.method {
				t.Fatalf("got %q/%v", c.User(), c.Method())
			}
			switch tt.method {
			case MethodSCRAMSHA256:
				if len(c.salt) != SCRAMSaltLen || c.iterations != SCRAMIterations || c.storedKey == [32]byte{} || c.serverKey == [32]byte{} {
					t.Fatalf("incomplete SCRAM verifier: %+v", c)
				}
				again, _ := NewCredentials(tt.user, tt.password, tt.method)
				if string(again.salt) == string(c.salt) {
					t.Fatal("two verifiers share a salt")
				}
			case MethodMD5:
				if c.md5Hash != md5Hex([]byte(tt.password+tt.user)) {
					t.Fatalf("md5 hash %q", c.md5Hash)
				}
			}
		})
	}
	if _, err := newSCRAMCredentials("u", "p", nil, 4096); err == nil {
		t.Fatal("empty salt accepted")
	}
	if _, err := newSCRAMCredentials("u", "p", []byte("salt"), 0); err == nil {
		t.Fatal("zero iterations accepted")
	}
}

// TestStoreLookup checks indexing, nil skipping and last-wins duplicates.
func TestStoreLookup(t *testing.T) {
	first, _ := NewCredentials("a", "1", MethodMD5)
	second, _ := NewCredentials("a", "2", MethodTrust)
	other, _ := NewCredentials("b", "", MethodTrust)
	s := NewStore(first, nil, second, other)
	if got, ok := s.Lookup("a"); !ok || got != second {
		t.Fatalf("Lookup(a) = %v, %v; want the later duplicate", got, ok)
	}
	if got, ok := s.Lookup("b"); !ok || got != other {
		t.Fatalf("Lookup(b) = %v, %v", got, ok)
	}
	if _, ok := s.Lookup("c"); ok {
		t.Fatal("Lookup(c) found a user")
	}
}
