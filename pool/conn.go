package pool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/nodetls"
	"github.com/pgowl/pgowl/wire"
)

// Login says who a backend connection logs in as and with which startup parameters.
type Login struct {
	User     string
	Password string
	Database string
	// Params are the client's startup parameters (application_name,
	// search_path, DateStyle, options, ...), forwarded to the node.
	Params map[string]string
	// SCRAM, when set and Password is empty, logs in with SCRAM passthrough
	// instead of a password: the node must hold the same verifier.
	SCRAM *SCRAMKeys

	keyed string // the key, computed once by Keyed
}

// Keyed returns l with its pool key computed once, for a login that acquires
// many times (a client session). Its fields must not change afterwards.
func (l Login) Keyed() Login {
	l.keyed = ""
	l.keyed = l.key()
	return l
}

// Key identifies the logins whose connections are interchangeable: the user, the database and
// the startup parameters.
func (l Login) Key() string { return l.key() }

// key identifies the logins whose connections are interchangeable.
func (l Login) key() string {
	if l.keyed != "" {
		return l.keyed
	}
	k := l.User + "\x00" + l.Database
	for _, name := range sortedKeys(l.Params) {
		k += "\x00" + name + "=" + l.Params[name]
	}
	return k
}

// Target is a node's address.
type Target struct {
	Node string
	Host string
	Port int
}

// Addr returns host:port, as the node is named in logs and by the monitor.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// DialAddress returns the network and address t is reached at, as libpq reads a host: its Unix
// socket when Host is a directory (an absolute path), else TCP to host:port.
func (t Target) DialAddress() (network, address string) {
	return pgconn.NetworkAddress(t.Host, uint16(t.Port))
}

// cancelAddress returns where a CancelRequest for the backend behind conn, a connection made to
// t, goes: over TCP, the address conn is connected to, as pgconn sends its own, so that a host
// name that resolves elsewhere since (a DNS change, several addresses) still reaches the server
// that runs the statement; else (a Unix socket) t's socket.
func cancelAddress(t Target, conn net.Conn) (network, address string) {
	if remote, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return "tcp", remote.String()
	}
	return t.DialAddress()
}

// Conn is one authenticated backend connection, owned by one client session
// at a time.
type Conn struct {
	Node string
	// Addr is the node's host:port (Target.Addr).
	Addr string
	// Network and Address are where a CancelRequest for its backend goes (cancelAddress): the
	// server's address the connection is connected to, or the node's Unix socket.
	Network, Address string
	PID              uint32
	Secret           []byte
	// ParameterStatus holds what the node reported at startup.
	ParameterStatus map[string]string
	// DefaultIsolation is default_transaction_isolation as the login left it
	// (server, database and role settings, startup parameters), read once
	// when the connection was made.
	DefaultIsolation string
	// TxStatus is the status byte of the last ReadyForQuery; the proxy keeps it current.
	TxStatus byte

	// Attached is owned by the user of the pool, for what it leaves on the
	// connection and must know again when it next gets it (the proxy keeps
	// its record of the statements prepared there and the settings the
	// connection carries). The pool never reads or
	// writes it: it stays with the connection while it is pooled, and goes
	// with it when the connection is closed.
	Attached any

	Reader *wire.Reader
	Writer *bufio.Writer

	// queriesSent counts the simple Query messages written on the
	// connection (see QueriesSent).
	queriesSent uint64

	netConn  net.Conn
	loginKey string
	gen      uint64
	created  time.Time
	// database is the login's database (RetireDatabase).
	database string
	// dialStarted is when the dial began: the login ran no earlier (RetireDatabase and
	// RetireDatabaseOn retire a connection whose login may have come before a change).
	dialStarted time.Time
	lastUsed    time.Time
	pool        *Pool
}

// WriteQuery buffers a simple Query message with the given query text on c,
// and counts it (QueriesSent).
func (c *Conn) WriteQuery(sql string) {
	var header [wire.HeaderSize]byte
	c.Writer.Write(wire.AppendHeader(header[:0], wire.MsgQuery, len(sql)+1))
	c.Writer.WriteString(sql)
	c.Writer.WriteByte(0)
	c.queriesSent++
}

// WriteQueryBody is WriteQuery for a Query message body as a client sent it
// (the query text and its terminating NUL).
func (c *Conn) WriteQueryBody(body []byte) {
	var header [wire.HeaderSize]byte
	c.Writer.Write(wire.AppendHeader(header[:0], wire.MsgQuery, len(body)))
	c.Writer.Write(body)
	c.queriesSent++
}

// QueriesSent is the number of simple Query messages written on c with
// WriteQuery and WriteQueryBody, by the pool (its health check) or its
// user. PostgreSQL drops the unnamed prepared statement at every simple
// Query, whoever sends it: a user that records which unnamed statement the
// connection holds records this count with it, and trusts the record only
// while the count is the same.
func (c *Conn) QueriesSent() uint64 { return c.queriesSent }

// NetConn exposes the socket, for deadlines.
func (c *Conn) NetConn() net.Conn { return c.netConn }

// Close closes the socket without returning the connection to any pool.
func (c *Conn) Close() error { return c.netConn.Close() }

const (
	// maxBackendMessage is PostgreSQL's own bound on a message (1 GiB).
	maxBackendMessage  = 1 << 30
	backendReadBuffer  = 32 << 10
	backendWriteBuffer = 16 << 10
)

func dial(ctx context.Context, t Target, login Login, opts *Options) (*Conn, error) {
	started := time.Now()
	if login.Password == "" && login.SCRAM != nil {
		c, err := dialPassthrough(ctx, t, login, opts)
		if c != nil {
			c.dialStarted = started
		}
		return c, err
	}
	dialTimeout, maxMessage := opts.DialTimeout, opts.MaxMessageSize
	// The host and port go through the connection string so that the TLS
	// settings (verify-full's host name) and prefer's plain-TCP fallback
	// apply to them.
	cfg, err := pgconn.ParseConfig(opts.TLS.ConnString(
		nodetls.Param{Key: "host", Value: t.Host}, nodetls.Param{Key: "port", Value: strconv.Itoa(t.Port)}))
	if err != nil {
		return nil, fmt.Errorf("tls.nodes: %w", err)
	}
	cfg.User = login.User
	cfg.Password = login.Password
	cfg.Database = login.Database
	cfg.ConnectTimeout = dialTimeout
	cfg.DialFunc = opts.TCP.DialFunc(dialTimeout)
	opts.TLS.Apply(cfg)
	cfg.RuntimeParams = make(map[string]string, len(login.Params))
	for k, v := range login.Params {
		cfg.RuntimeParams[k] = v
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	pc, err := pgconn.ConnectConfig(dctx, cfg)
	if err != nil {
		return nil, err
	}
	// Role and database settings apply at login and are not reported: a
	// serializable default makes a standby refuse every statement.
	isolation, err := pc.Exec(dctx, "SHOW default_transaction_isolation").ReadAll()
	if err != nil {
		pc.Close(context.Background())
		return nil, err
	}
	defaultIsolation := ""
	if len(isolation) == 1 && len(isolation[0].Rows) == 1 && len(isolation[0].Rows[0]) == 1 {
		defaultIsolation = string(isolation[0].Rows[0][0])
	}
	// Last before Hijack: a slow write (such as the query above) starts
	// pgconn's background reader, which would otherwise go on reading the
	// socket and take the node's first reply to pgowl.
	if err := pc.SyncConn(dctx); err != nil {
		pc.Close(context.Background())
		return nil, err
	}
	h, err := pc.Hijack()
	if err != nil {
		pc.Close(context.Background())
		return nil, err
	}
	now := time.Now()
	rw := wire.Direct(h.Conn)
	network, address := cancelAddress(t, h.Conn)
	return &Conn{
		Node:             t.Node,
		Addr:             t.Addr(),
		Network:          network,
		Address:          address,
		PID:              h.PID,
		Secret:           h.SecretKey,
		ParameterStatus:  h.ParameterStatuses,
		DefaultIsolation: defaultIsolation,
		TxStatus:         h.TxStatus,
		// Backend frames are forwarded in pieces, so a large row needs no large
		// buffer; the limit only guards the few frames pgowl reads whole.
		Reader:      wire.NewReader(rw, backendReadBuffer, max(maxMessage, maxBackendMessage)),
		Writer:      bufio.NewWriterSize(rw, backendWriteBuffer),
		netConn:     h.Conn,
		loginKey:    login.key(),
		database:    login.Database,
		dialStarted: started,
		created:     now,
		lastUsed:    now,
	}, nil
}

// PgError returns the server's error if err carries one.
func PgError(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	return nil
}

// TooManyConnections reports whether err is the node refusing a connection
// because it has reached max_connections.
func TooManyConnections(err error) bool {
	pgErr := PgError(err)
	return pgErr != nil && (pgErr.Code == "53300" || pgErr.Code == "53400")
}

// BusyError is returned when no connection to a node can be had in time.
type BusyError struct {
	Node   string
	Reason string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("node %s cannot take the statement: %s", e.Node, e.Reason)
}
