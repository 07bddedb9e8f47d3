package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/route"
)

// rvConn is a logged-in connection driven with raw protocol bytes.
type rvConn struct {
	conn net.Conn
	fe   *pgproto3.Frontend
}

// rvLogin logs in with pgconn at dsn, then takes the socket over.
func rvLogin(t *testing.T, dsn string) *rvConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pc, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("login %s: %v", dsn, err)
	}
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatalf("hijack: %v", err)
	}
	t.Cleanup(func() { hj.Conn.Close() })
	return &rvConn{conn: hj.Conn, fe: pgproto3.NewFrontend(hj.Conn, io.Discard)}
}

func (o *owl) rvDSN() string { return o.dsn(appUser, appPassword, appDatabase, nil) }

func rvNodeDSN(c *cluster.Cluster) string { return c.Nodes[0].DSN(appUser, appPassword, appDatabase) }

// rvResult is what came back for one exchange.
type rvResult struct {
	msgs     []string // one short word per backend message (notices and parameter statuses left out)
	closed   bool     // the peer closed the connection
	timedOut bool     // the wanted ReadyForQuery messages did not all come in time
	err      string
}

func (r rvResult) String() string {
	s := strings.Join(r.msgs, " ")
	if r.closed {
		s += " <closed>"
	}
	if r.timedOut {
		s += " <timeout>"
	}
	return s
}

// codes returns the SQLSTATEs of the errors, with their severities.
func (r rvResult) errors() []string {
	var out []string
	for _, m := range r.msgs {
		if strings.HasPrefix(m, "E(") {
			out = append(out, m)
		}
	}
	return out
}

// send writes raw bytes.
func (c *rvConn) send(t *testing.T, b []byte) {
	t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.conn.Write(b); err != nil {
		t.Logf("write: %v", err)
	}
}

// recv reads until ready ReadyForQuery messages came, the peer closed, or wait passed.
// After a FATAL it reads on to see the close.
func (c *rvConn) recv(ready int, wait time.Duration) rvResult {
	var res rvResult
	deadline := time.Now().Add(wait)
	seen := 0
	for seen < ready {
		c.conn.SetReadDeadline(deadline)
		msg, err := c.fe.Receive()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				res.timedOut = true
			} else {
				res.closed = true
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					res.err = err.Error()
				}
			}
			break
		}
		switch m := msg.(type) {
		case *pgproto3.NoticeResponse, *pgproto3.ParameterStatus:
			continue
		case *pgproto3.ReadyForQuery:
			res.msgs = append(res.msgs, "Z"+string(m.TxStatus))
			seen++
		case *pgproto3.ErrorResponse:
			res.msgs = append(res.msgs, fmt.Sprintf("E(%s %s: %s)", m.Severity, m.Code, m.Message))
			if m.Severity == "FATAL" {
				c.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.fe.Receive(); err != nil {
					var ne net.Error
					res.closed = !(errors.As(err, &ne) && ne.Timeout())
				}
				c.conn.SetReadDeadline(time.Time{})
				return res
			}
		default:
			buf, _ := msg.Encode(nil)
			res.msgs = append(res.msgs, string(buf[0]))
		}
	}
	c.conn.SetReadDeadline(time.Time{})
	return res
}

// ---------------------------------------------------------------------------
// Frames

func rvFrame(typ byte, parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	out := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(4+len(body)))
	return append(out, body...)
}

func rvCStr(s string) []byte { return append([]byte(s), 0) }
func rvI16(v int) []byte     { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
func rvI32(v int) []byte     { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func rvQuery(sql string) []byte { return rvFrame('Q', rvCStr(sql)) }
func rvParse(name, sql string, types ...int) []byte {
	p := [][]byte{rvCStr(name), rvCStr(sql), rvI16(len(types))}
	for _, ty := range types {
		p = append(p, rvI32(ty))
	}
	return rvFrame('P', p...)
}

// rvBind binds text parameters, all in the text format, results in text.
func rvBind(portal, stmt string, params ...string) []byte {
	p := [][]byte{rvCStr(portal), rvCStr(stmt), rvI16(0), rvI16(len(params))}
	for _, v := range params {
		p = append(p, rvI32(len(v)), []byte(v))
	}
	p = append(p, rvI16(0))
	return rvFrame('B', p...)
}
func rvExecute(portal string, maxRows int) []byte {
	return rvFrame('E', rvCStr(portal), rvI32(maxRows))
}
func rvDescribe(kind byte, name string) []byte { return rvFrame('D', []byte{kind}, rvCStr(name)) }
func rvClose(kind byte, name string) []byte    { return rvFrame('C', []byte{kind}, rvCStr(name)) }

var (
	rvSync      = rvFrame('S')
	rvFlush     = rvFrame('H')
	rvTerminate = rvFrame('X')
)

func rvJoin(frames ...[]byte) []byte {
	var out []byte
	for _, f := range frames {
		out = append(out, f...)
	}
	return out
}

// ---------------------------------------------------------------------------
// Node state

// rvLeftovers lists, on every node, the app user's backends that are in a
// transaction, or active, other than the asking one.
func rvLeftovers(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	var out []string
	for _, n := range c.Nodes {
		var s string
		ctx := timeoutCtx(t, statementTimeout)
		err := n.QueryRow(ctx, `SELECT coalesce(string_agg(pid || ' ' || state || ' xact=' || (xact_start IS NOT NULL) || ' [' || left(query, 60) || ']', '; '), '')
			FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()
			AND (state <> 'idle' OR xact_start IS NOT NULL)`, appUser).Scan(&s)
		if err != nil {
			t.Fatalf("read pg_stat_activity on %s: %v", n.Name, err)
		}
		if s != "" {
			out = append(out, n.Name+": "+s)
		}
	}
	return strings.Join(out, " | ")
}

// rvWaitNoLeftovers waits up to limit for rvLeftovers to be empty and returns the last answer.
func rvWaitNoLeftovers(t *testing.T, c *cluster.Cluster, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		s := rvLeftovers(t, c)
		if s == "" || time.Now().After(deadline) {
			return s
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rvOwlOnPrimaryOnly starts pgowl in front of c's primary alone with one backend per node, so
// that every client of the app login shares one backend connection.
func rvOwlOnPrimaryOnly(t *testing.T, c *cluster.Cluster, mutate func(*config.Config)) *owl {
	t.Helper()
	o := startOwlNoWait(t, c, func(cfg *config.Config) {
		cfg.Nodes = cfg.Nodes[:1]
		cfg.Pool.MaxPerNode = 1
		if mutate != nil {
			mutate(cfg)
		}
	})
	o.waitRoles(t, map[string]route.Role{c.Nodes[0].Name: route.RolePrimary})
	return o
}
