package pool

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/wire"
)

// maxHealthCheckTimeout bounds a health check, even with a long DialTimeout.
const maxHealthCheckTimeout = 2 * time.Second

// checkAlive sends an empty query on c, which the caller owns, and reads the
// replies up to ReadyForQuery, within min(DialTimeout, 2s). It fails when the
// node closed the connection, answers with an error, or leaves the
// connection outside a transaction-idle state.
func (p *Pool) checkAlive(c *Conn) error {
	timeout := min(p.opts.DialTimeout, maxHealthCheckTimeout)
	if err := c.netConn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("health check: set the deadline: %w", err)
	}
	defer c.netConn.SetDeadline(time.Time{})
	c.WriteQuery("") // an empty query: the node runs nothing
	if err := c.Writer.Flush(); err != nil {
		return fmt.Errorf("health check: send the empty query: %w", err)
	}
	for {
		typ, body, err := c.Reader.ReadFrame()
		if err != nil {
			return fmt.Errorf("health check: read the reply to the empty query: %w", err)
		}
		switch typ {
		case wire.MsgReadyForQuery:
			if len(body) != 1 {
				return fmt.Errorf("health check: ReadyForQuery has a body of %d bytes, want 1", len(body))
			}
			c.TxStatus = body[0]
			if body[0] != wire.TxIdle {
				return fmt.Errorf("health check: the connection is in transaction status %q, want 'I'", body[0])
			}
			return nil
		case wire.MsgErrorResponse:
			return fmt.Errorf("health check: the node answered the empty query with an error: %w", decodeError(body))
		}
		// EmptyQueryResponse, and whatever the node sent on its own while
		// the connection was idle (NoticeResponse, ParameterStatus,
		// NotificationResponse), is skipped.
	}
}

// decodeError turns the body of an ErrorResponse into an error.
func decodeError(body []byte) error {
	var msg pgproto3.ErrorResponse
	if err := msg.Decode(body); err != nil {
		return errors.New("malformed ErrorResponse")
	}
	return fmt.Errorf("%s %s: %s", msg.Severity, msg.Code, msg.Message)
}
