package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"
)

// SCRAMSHA256 is the SASL mechanism without channel binding, offered on every connection.
const SCRAMSHA256 = "SCRAM-SHA-256"

// SCRAMSHA256Plus is the SASL mechanism with channel binding, offered on TLS connections only.
const SCRAMSHA256Plus = "SCRAM-SHA-256-PLUS"

// channelBindingType is the one channel binding pgowl supports, as PostgreSQL does (RFC 5929).
const channelBindingType = "tls-server-end-point"

// serverNonceLen is the number of random bytes in the server's nonce, as in PostgreSQL.
const serverNonceLen = 18

// saslInitialResponse is the decoded body of a SASLInitialResponse message.
type saslInitialResponse struct {
	mechanism string
	// data is the initial client response; hasData is false when the client sent length -1.
	data    []byte
	hasData bool
}

// parseSASLInitialResponse decodes "mechanism\0" Int32(len) Byte[len] with the length checked against the body.
func parseSASLInitialResponse(body []byte) (saslInitialResponse, *Error) {
	nul := bytes.IndexByte(body, 0)
	if nul < 0 {
		return saslInitialResponse{}, protocolViolation("malformed SASLInitialResponse message", "mechanism name is not NUL-terminated")
	}
	resp := saslInitialResponse{mechanism: string(body[:nul])}
	rest := body[nul+1:]
	if len(rest) < 4 {
		return saslInitialResponse{}, protocolViolation("malformed SASLInitialResponse message", "missing initial response length")
	}
	length := int32(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	switch {
	case length == -1 && len(rest) == 0:
		return resp, nil
	case length < 0 || int(length) != len(rest):
		return saslInitialResponse{}, protocolViolation("malformed SASLInitialResponse message",
			"initial response length "+strconv.Itoa(int(length))+" does not match the "+strconv.Itoa(len(rest))+" bytes sent")
	}
	resp.data = rest
	resp.hasData = true
	return resp, nil
}

// scramExchange is the server side of one SCRAM-SHA-256 authentication (RFC 5802 section 5, RFC 7677).
//
// It is driven in two steps, clientFirst and then clientFinal, and keeps what the
// AuthMessage needs in between. doomed marks the fake exchange for an unknown
// user, which fails even if the proof happened to match.
type scramExchange struct {
	creds       *Credentials
	serverNonce string
	doomed      bool
	// channelBinding is the tls-server-end-point data of the connection, nil when SCRAMSHA256Plus
	// was not offered; plus is true when the client selected it.
	channelBinding []byte
	plus           bool

	// clientKey is the ClientKey the client's proof revealed, set once the proof matched.
	clientKey [sha256.Size]byte

	gs2Header               string // "n,,", "y,," or "p=tls-server-end-point,,", checked against c= in the final message
	clientNonce             string
	clientFirstBare         string
	serverFirst             string
	clientFinalWithoutProof string
}

// scramAttribute is one "x=value" pair of a SCRAM message.
type scramAttribute struct {
	name  byte
	value string
}

// splitSCRAMAttributes splits a SCRAM message into its comma-separated attributes, validating each one's shape.
func splitSCRAMAttributes(msg string) ([]scramAttribute, *Error) {
	parts := strings.Split(msg, ",")
	attrs := make([]scramAttribute, 0, len(parts))
	for _, part := range parts {
		if len(part) < 2 || part[1] != '=' || !isASCIILetter(part[0]) {
			return nil, malformedSCRAM("attribute expected, found " + strconv.Quote(truncate(part, 16)))
		}
		attrs = append(attrs, scramAttribute{name: part[0], value: part[2:]})
	}
	return attrs, nil
}

// clientFirst consumes the client-first-message and returns the server-first-message to send.
func (x *scramExchange) clientFirst(msg string) (string, *Error) {
	if strings.IndexByte(msg, 0) >= 0 {
		return "", malformedSCRAM("NUL byte in client-first-message")
	}
	if msg == "" {
		return "", malformedSCRAM("empty client-first-message")
	}
	// gs2-header = gs2-cbind-flag "," [ authzid ] ","
	var rest string
	switch msg[0] {
	case 'n', 'y':
		if x.plus {
			return "", malformedSCRAM("the client selected SCRAM-SHA-256-PLUS, but the SCRAM message does not include channel binding data")
		}
		if msg[0] == 'y' && x.channelBinding != nil {
			// The client could bind but believes the server cannot: a downgrade by someone in between.
			return "", protocolViolation("SCRAM channel binding negotiation error",
				"the client supports SCRAM channel binding but thinks the server does not, while this server does")
		}
		if len(msg) < 2 || msg[1] != ',' {
			return "", malformedSCRAM("comma expected after channel-binding flag")
		}
		rest = msg[2:]
	case 'p':
		if !x.plus {
			return "", protocolViolation("malformed SCRAM message",
				"client selected SCRAM-SHA-256 without channel binding, but the SCRAM message includes channel binding data")
		}
		comma := strings.IndexByte(msg, ',')
		if comma < 0 || !strings.HasPrefix(msg, "p=") {
			return "", malformedSCRAM("channel binding type expected after p")
		}
		if msg[2:comma] != channelBindingType {
			return "", protocolViolation("unsupported SCRAM channel-binding type",
				"channel binding type "+strconv.Quote(truncate(msg[2:comma], 32))+" is not "+channelBindingType)
		}
		rest = msg[comma+1:]
	default:
		return "", malformedSCRAM("unexpected channel-binding flag " + strconv.Quote(msg[:1]))
	}
	if strings.HasPrefix(rest, "a=") {
		return "", unsupportedSCRAM("client uses authorization identity, but it is not supported")
	}
	if rest == "" || rest[0] != ',' {
		return "", malformedSCRAM("comma expected after the authorization identity field")
	}
	x.gs2Header = msg[:len(msg)-len(rest)+1]
	x.clientFirstBare = rest[1:]

	attrs, err := splitSCRAMAttributes(x.clientFirstBare)
	if err != nil {
		return "", err
	}
	if attrs[0].name == 'm' {
		return "", unsupportedSCRAM("client requires an unsupported SCRAM extension")
	}
	// The user name in n= is ignored: PostgreSQL authenticates the startup user.
	if attrs[0].name != 'n' {
		return "", malformedSCRAM("expected attribute \"n\" in client-first-message")
	}
	if len(attrs) < 2 || attrs[1].name != 'r' {
		return "", malformedSCRAM("expected attribute \"r\" in client-first-message")
	}
	if !isPrintableNonce(attrs[1].value) {
		return "", malformedSCRAM("client nonce is empty or contains non-printable characters")
	}
	// Any further attributes are optional extensions, ignored as RFC 5802 allows.
	x.clientNonce = attrs[1].value

	x.serverFirst = "r=" + x.clientNonce + x.serverNonce +
		",s=" + base64.StdEncoding.EncodeToString(x.creds.salt) +
		",i=" + strconv.Itoa(x.creds.iterations)
	return x.serverFirst, nil
}

// clientFinal consumes the client-final-message, verifies the proof and returns the server-final-message.
func (x *scramExchange) clientFinal(msg string) (string, *Error) {
	if strings.IndexByte(msg, 0) >= 0 {
		return "", malformedSCRAM("NUL byte in client-final-message")
	}
	attrs, err := splitSCRAMAttributes(msg)
	if err != nil {
		return "", err
	}
	if attrs[0].name != 'c' {
		return "", malformedSCRAM("expected attribute \"c\" in client-final-message")
	}
	binding := []byte(x.gs2Header)
	if x.plus {
		binding = append(binding, x.channelBinding...)
	}
	if subtle.ConstantTimeCompare([]byte(attrs[0].value), []byte(base64.StdEncoding.EncodeToString(binding))) != 1 {
		if x.plus {
			return "", protocolViolation("SCRAM channel binding check failed",
				"c= does not hold the gs2 header and this connection's tls-server-end-point data")
		}
		return "", protocolViolation("unexpected SCRAM channel-binding attribute in client-final-message",
			"c= does not repeat the gs2 header "+strconv.Quote(x.gs2Header))
	}
	if len(attrs) < 2 || attrs[1].name != 'r' {
		return "", malformedSCRAM("expected attribute \"r\" in client-final-message")
	}
	if subtle.ConstantTimeCompare([]byte(attrs[1].value), []byte(x.clientNonce+x.serverNonce)) != 1 {
		return "", malformedSCRAM("final nonce does not match")
	}
	// Extensions may follow; the proof is the first "p" after them and must end the message.
	proofAt := -1
	for i := 2; i < len(attrs); i++ {
		if attrs[i].name == 'p' {
			proofAt = i
			break
		}
	}
	if proofAt < 0 {
		return "", malformedSCRAM("could not find proof in client-final-message")
	}
	if proofAt != len(attrs)-1 {
		return "", malformedSCRAM("garbage found at the end of client-final-message")
	}
	proofText := attrs[proofAt].value
	proof, decodeErr := base64.StdEncoding.DecodeString(proofText)
	if decodeErr != nil || len(proof) != sha256.Size {
		return "", malformedSCRAM("malformed proof in client-final-message")
	}
	x.clientFinalWithoutProof = msg[:len(msg)-len(",p=")-len(proofText)]

	authMessage := x.clientFirstBare + "," + x.serverFirst + "," + x.clientFinalWithoutProof
	clientSignature := hmacSHA256(x.creds.storedKey[:], authMessage)
	var clientKey [sha256.Size]byte
	subtle.XORBytes(clientKey[:], proof, clientSignature[:])
	storedKey := sha256.Sum256(clientKey[:])
	matches := hmac.Equal(storedKey[:], x.creds.storedKey[:])
	switch {
	case x.doomed:
		return "", passwordFailed(x.creds.user, ReasonUnknownUser)
	case !matches:
		return "", passwordFailed(x.creds.user, ReasonWrongPassword)
	}
	x.clientKey = clientKey
	serverSignature := hmacSHA256(x.creds.serverKey[:], authMessage)
	return "v=" + base64.StdEncoding.EncodeToString(serverSignature[:]), nil
}

// isASCIILetter reports whether b is in [A-Za-z], the SCRAM attribute name alphabet.
func isASCIILetter(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// isPrintableNonce reports whether s is a non-empty run of printable ASCII without commas (RFC 5802 "printable").
func isPrintableNonce(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7E || s[i] == ',' {
			return false
		}
	}
	return true
}

// truncate shortens s to at most n bytes for inclusion in a log reason.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
