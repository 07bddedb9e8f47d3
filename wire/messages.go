package wire

// Message types of protocol 3.0, named by the side that sends them. A byte means different
// messages in the two directions ('E' is Execute from a client and ErrorResponse from a server,
// 'D' is Describe and DataRow, 'C' is Close and CommandComplete, 'S' is Sync and
// ParameterStatus), so code compares a frame's type with the constant of the direction it reads.

// Frontend message types: what a client sends.
const (
	// MsgQuery is a simple Query.
	MsgQuery byte = 'Q'
	// MsgParse is an extended-protocol Parse.
	MsgParse byte = 'P'
	// MsgBind is a Bind of a prepared statement to a portal.
	MsgBind byte = 'B'
	// MsgDescribe is a Describe of a statement or a portal.
	MsgDescribe byte = 'D'
	// MsgExecute is an Execute of a portal.
	MsgExecute byte = 'E'
	// MsgClose is a Close of a statement or a portal.
	MsgClose byte = 'C'
	// MsgSync ends an extended-protocol batch.
	MsgSync byte = 'S'
	// MsgFlush asks the server to send what it has buffered.
	MsgFlush byte = 'H'
	// MsgFunctionCall is a fast-path function call.
	MsgFunctionCall byte = 'F'
	// MsgCopyFail aborts a COPY FROM STDIN.
	MsgCopyFail byte = 'f'
	// MsgTerminate closes the connection.
	MsgTerminate byte = 'X'
	// MsgPasswordMessage carries a password or a SASL message during authentication.
	MsgPasswordMessage byte = 'p'
)

// Messages both sides send during COPY.
const (
	// MsgCopyData carries COPY data.
	MsgCopyData byte = 'd'
	// MsgCopyDone ends COPY data.
	MsgCopyDone byte = 'c'
)

// Backend message types: what a server sends.
const (
	// MsgAuthentication is an authentication request or result.
	MsgAuthentication byte = 'R'
	// MsgParameterStatus reports a run-time parameter's value.
	MsgParameterStatus byte = 'S'
	// MsgBackendKeyData carries the process id and secret key for cancel requests.
	MsgBackendKeyData byte = 'K'
	// MsgReadyForQuery ends a reply; its body is the transaction status (TxIdle, TxInBlock, TxFailed).
	MsgReadyForQuery byte = 'Z'
	// MsgRowDescription describes the columns of the rows that follow.
	MsgRowDescription byte = 'T'
	// MsgDataRow is one row.
	MsgDataRow byte = 'D'
	// MsgCommandComplete ends a statement's result with its command tag.
	MsgCommandComplete byte = 'C'
	// MsgEmptyQueryResponse answers an empty query string.
	MsgEmptyQueryResponse byte = 'I'
	// MsgErrorResponse is an error.
	MsgErrorResponse byte = 'E'
	// MsgNoticeResponse is a notice or warning.
	MsgNoticeResponse byte = 'N'
	// MsgParseComplete answers Parse.
	MsgParseComplete byte = '1'
	// MsgBindComplete answers Bind.
	MsgBindComplete byte = '2'
	// MsgCloseComplete answers Close.
	MsgCloseComplete byte = '3'
	// MsgNoData answers Describe of something that returns no rows.
	MsgNoData byte = 'n'
	// MsgParameterDescription answers Describe of a statement with its parameter types.
	MsgParameterDescription byte = 't'
	// MsgPortalSuspended ends an Execute that reached its row limit.
	MsgPortalSuspended byte = 's'
	// MsgNotificationResponse is a NOTIFY delivered to a listener.
	MsgNotificationResponse byte = 'A'
	// MsgCopyInResponse starts a COPY FROM STDIN.
	MsgCopyInResponse byte = 'G'
	// MsgCopyOutResponse starts a COPY TO STDOUT.
	MsgCopyOutResponse byte = 'H'
	// MsgCopyBothResponse starts a streaming-replication COPY.
	MsgCopyBothResponse byte = 'W'
	// MsgFunctionCallResponse answers a fast-path function call.
	MsgFunctionCallResponse byte = 'V'
)

// What Describe and Close name: the byte after the message type.
const (
	// TargetStatement names a prepared statement.
	TargetStatement byte = 'S'
	// TargetPortal names a portal.
	TargetPortal byte = 'P'
)

// Transaction status in ReadyForQuery.
const (
	// TxIdle is outside a transaction block.
	TxIdle byte = 'I'
	// TxInBlock is inside a transaction block.
	TxInBlock byte = 'T'
	// TxFailed is inside a failed transaction block: statements are refused until it ends.
	TxFailed byte = 'E'
)

// The one-byte answers of a server to SSLRequest (and GSSENCRequest).
const (
	// SSLAccepted means the server starts TLS next.
	SSLAccepted byte = 'S'
	// SSLRefused means the server goes on in plain text.
	SSLRefused byte = 'N'
)
