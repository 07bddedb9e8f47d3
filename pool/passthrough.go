package pool

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/nodetls"
	"github.com/pgowl/pgowl/wire"
)

// SCRAMKeys are the secrets of SCRAM passthrough: the ClientKey a client's proof revealed and the
// ServerKey of the verifier it was checked against. With them pgowl logs in to a node that holds
// the same verifier (same salt and iteration count) without knowing the password, as PgBouncer does.
type SCRAMKeys struct {
	ClientKey [sha256.Size]byte
	ServerKey [sha256.Size]byte
}

// dialPassthrough opens a connection to t and logs in with SCRAM passthrough: pgconn knows only
// passwords, so the startup is pgowl's own. TLS follows the same settings as every other node
// connection.
func dialPassthrough(ctx context.Context, t Target, login Login, opts *Options) (*Conn, error) {
	cfg, err := pgconn.ParseConfig(opts.TLS.ConnString(
		nodetls.Param{Key: "host", Value: t.Host}, nodetls.Param{Key: "port", Value: strconv.Itoa(t.Port)}))
	if err != nil {
		return nil, fmt.Errorf("tls.nodes: %w", err)
	}
	cfg.DialFunc = opts.TCP.DialFunc(opts.DialTimeout)
	opts.TLS.Apply(cfg)
	dctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	network, address := t.DialAddress()
	netConn, err := cfg.DialFunc(dctx, network, address)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			netConn.Close()
		}
	}()
	if deadline, has := dctx.Deadline(); has {
		netConn.SetDeadline(deadline)
	}
	// ctx ended (the pool gives up dials to a node that stopped answering, AbandonDials): the
	// login's reads and writes end at once, as pgconn ends its own, not at the dial's deadline.
	unwatch := context.AfterFunc(dctx, func() { netConn.SetDeadline(time.Now()) })
	defer unwatch()
	rw := wire.Direct(netConn)
	reader := wire.NewReader(rw, backendReadBuffer, max(opts.MaxMessageSize, maxBackendMessage))
	writer := bufio.NewWriterSize(rw, backendWriteBuffer)
	send := func(msg pgproto3.FrontendMessage) error {
		buf, err := msg.Encode(nil)
		if err != nil {
			return err
		}
		if _, err := writer.Write(buf); err != nil {
			return err
		}
		return writer.Flush()
	}
	params := map[string]string{"user": login.User, "database": login.Database}
	for k, v := range login.Params {
		params[k] = v
	}
	if err := send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: params}); err != nil {
		return nil, err
	}
	c := &Conn{
		Node: t.Node, Addr: t.Addr(), ParameterStatus: map[string]string{},
		Reader: reader, Writer: writer, netConn: netConn, loginKey: login.key(), database: login.Database,
	}
	c.Network, c.Address = cancelAddress(t, netConn)
	if err := scramPassthrough(reader, send, login.SCRAM); err != nil {
		return nil, err
	}
	// After AuthenticationOk: ParameterStatus and BackendKeyData up to ReadyForQuery.
	for {
		typ, body, err := reader.ReadFrame()
		if err != nil {
			return nil, err
		}
		switch typ {
		case wire.MsgParameterStatus:
			var msg pgproto3.ParameterStatus
			if err := msg.Decode(body); err != nil {
				return nil, err
			}
			c.ParameterStatus[msg.Name] = msg.Value
			continue
		case wire.MsgBackendKeyData:
			var msg pgproto3.BackendKeyData
			if err := msg.Decode(body); err != nil {
				return nil, err
			}
			c.PID, c.Secret = msg.ProcessID, append([]byte(nil), msg.SecretKey...)
			continue
		case wire.MsgErrorResponse:
			return nil, nodeError(body)
		case wire.MsgReadyForQuery:
			c.TxStatus = body[0]
		default:
			continue // NoticeResponse
		}
		break
	}
	// Role and database settings apply at login and are not reported (see dial).
	c.WriteQuery("SHOW default_transaction_isolation")
	if err := writer.Flush(); err != nil {
		return nil, err
	}
	for {
		typ, body, err := reader.ReadFrame()
		if err != nil {
			return nil, err
		}
		if typ == wire.MsgDataRow {
			var row pgproto3.DataRow
			if err := row.Decode(body); err == nil && len(row.Values) == 1 {
				c.DefaultIsolation = string(row.Values[0])
			}
		}
		if typ == wire.MsgErrorResponse {
			return nil, nodeError(body)
		}
		if typ == wire.MsgReadyForQuery {
			c.TxStatus = body[0]
			break
		}
	}
	if !unwatch() {
		return nil, fmt.Errorf("SCRAM passthrough: %w", context.Cause(dctx)) // its deadline may be set: not handed out
	}
	netConn.SetDeadline(time.Time{})
	now := time.Now()
	c.created, c.lastUsed = now, now
	ok = true
	return c, nil
}

// scramPassthrough answers the node's authentication request with SCRAM-SHA-256, proving
// knowledge of the password with the ClientKey, and checks the node's signature with the ServerKey.
func scramPassthrough(reader *wire.Reader, send func(pgproto3.FrontendMessage) error, keys *SCRAMKeys) error {
	next := func() (pgproto3.BackendMessage, error) {
		typ, body, err := reader.ReadFrame()
		if err != nil {
			return nil, err
		}
		if typ == wire.MsgErrorResponse {
			return nil, nodeError(body)
		}
		if typ != wire.MsgAuthentication {
			return nil, fmt.Errorf("SCRAM passthrough: the node sent message type %q during authentication", typ)
		}
		var auth pgproto3.AuthenticationResponseMessage
		switch binary.BigEndian.Uint32(body) {
		case pgproto3.AuthTypeOk:
			auth = &pgproto3.AuthenticationOk{}
		case pgproto3.AuthTypeSASL:
			auth = &pgproto3.AuthenticationSASL{}
		case pgproto3.AuthTypeSASLContinue:
			auth = &pgproto3.AuthenticationSASLContinue{}
		case pgproto3.AuthTypeSASLFinal:
			auth = &pgproto3.AuthenticationSASLFinal{}
		default:
			return nil, fmt.Errorf("SCRAM passthrough: the node asks for authentication type %d; it needs scram-sha-256 in the node's pg_hba.conf", binary.BigEndian.Uint32(body))
		}
		if err := auth.Decode(body); err != nil {
			return nil, err
		}
		return auth, nil
	}
	msg, err := next()
	if err != nil {
		return err
	}
	if _, trusted := msg.(*pgproto3.AuthenticationOk); trusted {
		return nil
	}
	sasl, isSASL := msg.(*pgproto3.AuthenticationSASL)
	if !isSASL || !containsString(sasl.AuthMechanisms, "SCRAM-SHA-256") {
		return fmt.Errorf("SCRAM passthrough: the node did not offer SCRAM-SHA-256")
	}
	nonceBytes := make([]byte, 18)
	rand.Read(nonceBytes)
	clientNonce := base64.StdEncoding.EncodeToString(nonceBytes)
	clientFirstBare := "n=,r=" + clientNonce
	if err := send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,," + clientFirstBare)}); err != nil {
		return err
	}
	if msg, err = next(); err != nil {
		return err
	}
	cont, isContinue := msg.(*pgproto3.AuthenticationSASLContinue)
	if !isContinue {
		return fmt.Errorf("SCRAM passthrough: expected the server-first-message, got %T", msg)
	}
	serverFirst := string(cont.Data)
	var combinedNonce string
	for _, attr := range strings.Split(serverFirst, ",") {
		if value, found := strings.CutPrefix(attr, "r="); found {
			combinedNonce = value
		}
	}
	if !strings.HasPrefix(combinedNonce, clientNonce) || len(combinedNonce) == len(clientNonce) {
		return fmt.Errorf("SCRAM passthrough: the node's nonce does not extend pgowl's")
	}
	withoutProof := "c=biws,r=" + combinedNonce
	authMessage := clientFirstBare + "," + serverFirst + "," + withoutProof
	storedKey := sha256.Sum256(keys.ClientKey[:])
	signature := hmacSum(storedKey[:], authMessage)
	proof := make([]byte, sha256.Size)
	subtle.XORBytes(proof, keys.ClientKey[:], signature)
	if err := send(&pgproto3.SASLResponse{Data: []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))}); err != nil {
		return err
	}
	if msg, err = next(); err != nil {
		return err
	}
	final, isFinal := msg.(*pgproto3.AuthenticationSASLFinal)
	if !isFinal {
		return fmt.Errorf("SCRAM passthrough: expected the server-final-message, got %T", msg)
	}
	want := "v=" + base64.StdEncoding.EncodeToString(hmacSum(keys.ServerKey[:], authMessage))
	if !hmac.Equal(final.Data, []byte(want)) {
		return fmt.Errorf("SCRAM passthrough: the node's signature does not match the verifier pgowl holds")
	}
	if msg, err = next(); err != nil {
		return err
	}
	if _, isOk := msg.(*pgproto3.AuthenticationOk); !isOk {
		return fmt.Errorf("SCRAM passthrough: expected AuthenticationOk, got %T", msg)
	}
	return nil
}

// hmacSum returns HMAC-SHA-256(key, message).
func hmacSum(key []byte, message string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(message))
	return mac.Sum(nil)
}

// nodeError decodes an ErrorResponse body into the *pgconn.PgError that PgError finds.
func nodeError(body []byte) error {
	var msg pgproto3.ErrorResponse
	if err := msg.Decode(body); err != nil {
		return errors.New("the node sent a malformed ErrorResponse")
	}
	return pgconn.ErrorResponseToPgError(&msg)
}

// containsString reports whether list holds s.
func containsString(list []string, s string) bool {
	for _, item := range list {
		if item == s {
			return true
		}
	}
	return false
}
