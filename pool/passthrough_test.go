package pool

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/proxy/auth"
	"github.com/pgowl/pgowl/wire"
)

// pipeNode plays a node's authentication with auth.Store over one end of a pipe.
type pipeNode struct {
	conn   net.Conn
	reader *wire.Reader
}

func (n pipeNode) Send(msg pgproto3.BackendMessage) error {
	buf, err := msg.Encode(nil)
	if err != nil {
		return err
	}
	_, err = n.conn.Write(buf)
	return err
}

func (n pipeNode) ReceivePassword() ([]byte, error) {
	_, body, err := n.reader.ReadFrame()
	return body, err
}

// TestSCRAMPassthroughProvesWithoutThePassword logs in to a SCRAM server with only the ClientKey
// and ServerKey, and checks the refusals: a wrong ClientKey, and a server whose signature does
// not come from the verifier pgowl holds.
func TestSCRAMPassthroughProvesWithoutThePassword(t *testing.T) {
	salt := []byte("passthrough-salt")
	salted, err := pbkdf2.Key(sha256.New, "the-password", salt, 4096, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, msg string) (sum [sha256.Size]byte) {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		copy(sum[:], h.Sum(nil))
		return sum
	}
	clientKey, serverKey := mac(salted, "Client Key"), mac(salted, "Server Key")
	storedKey := sha256.Sum256(clientKey[:])
	b64 := base64.StdEncoding.EncodeToString
	verifier := "SCRAM-SHA-256$4096:" + b64(salt) + "$" + b64(storedKey[:]) + ":" + b64(serverKey[:])
	otherServerKey := mac([]byte("another"), "Server Key")
	impostor := "SCRAM-SHA-256$4096:" + b64(salt) + "$" + b64(storedKey[:]) + ":" + b64(otherServerKey[:])
	wrongClientKey := mac([]byte("guess"), "Client Key")

	tests := []struct {
		name        string
		nodeSecret  string
		keys        SCRAMKeys
		wantErrText string
	}{
		{"the client's keys", verifier, SCRAMKeys{ClientKey: clientKey, ServerKey: serverKey}, ""},
		{"a wrong ClientKey", verifier, SCRAMKeys{ClientKey: wrongClientKey, ServerKey: serverKey}, "28P01"},
		{"a node signing with another ServerKey", impostor, SCRAMKeys{ClientKey: clientKey, ServerKey: serverKey}, "signature does not match"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			creds, err := auth.NewVerifierCredentials("owl", test.nodeSecret)
			if err != nil {
				t.Fatal(err)
			}
			pgowlSide, nodeSide := net.Pipe()
			defer pgowlSide.Close()
			defer nodeSide.Close()
			deadline := time.Now().Add(10 * time.Second)
			pgowlSide.SetDeadline(deadline)
			nodeSide.SetDeadline(deadline)
			nodeDone := make(chan error, 1)
			go func() {
				node := pipeNode{conn: nodeSide, reader: wire.NewReader(nodeSide, 4096, 1<<20)}
				_, err := auth.NewStore(creds).AuthenticateRequest(node, auth.Request{User: "owl"})
				if ae, ok := err.(*auth.Error); ok {
					node.Send(ae.ErrorResponse())
				}
				nodeDone <- err
			}()
			reader := wire.NewReader(pgowlSide, 4096, 1<<20)
			send := func(msg pgproto3.FrontendMessage) error {
				buf, err := msg.Encode(nil)
				if err != nil {
					return err
				}
				_, err = pgowlSide.Write(buf)
				return err
			}
			err = scramPassthrough(reader, send, &test.keys)
			pgowlSide.Close()
			nodeErr := <-nodeDone
			if test.wantErrText == "" {
				if err != nil || nodeErr != nil {
					t.Fatalf("passthrough: %v; node: %v", err, nodeErr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), test.wantErrText) {
				t.Fatalf("passthrough: %v, want an error with %q", err, test.wantErrText)
			}
		})
	}
}
