package proxy

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/auth"
	"github.com/pgowl/pgowl/route"
)

// clientError is an error pgowl itself reports to a client.
type clientError struct {
	Severity string // ERROR or FATAL
	SQLState string
	Message  string
	Detail   string
	Hint     string
}

func (e *clientError) Error() string { return e.Message }

// Well-known SQLSTATEs pgowl uses for its own errors.
const (
	sqlstateInvalidSQLStatementName = "26000"
	sqlstateReservedName            = "42939"
	sqlstateProtocolViolation       = "08P01"
	sqlstateConnectionFailure       = "08006"
	sqlstateAdminShutdown           = "57P01"
	sqlstateCrashShutdown           = "57P02"
	sqlstateTooManyConnections      = "53300"
	sqlstateCannotConnectNow        = "57P03"
	sqlstateInvalidAuthSpec         = "28000"
	sqlstateInsufficientPrivilege   = "42501"
	sqlstateUndefinedObject         = "42704"
	sqlstateInvalidParamValue       = "22023"
	sqlstateFeatureNotSupported     = "0A000"
	sqlstateInternalError           = "XX000"
	// sqlstateDuplicatePreparedStatement is duplicate_prepared_statement.
	sqlstateDuplicatePreparedStatement = "42P05"
	// sqlstateConfigurationLimitExceeded refuses what a pgowl limit does not allow.
	sqlstateConfigurationLimitExceeded = "53400"
)

func protocolViolation(format string, args ...any) *clientError {
	return &clientError{Severity: "FATAL", SQLState: sqlstateProtocolViolation, Message: "pgowl: " + fmt.Sprintf(format, args...)}
}

// toErrorResponse turns any error into the ErrorResponse the client sees.
// This is the one place where pgowl's error codes become wire errors.
func toErrorResponse(err error) *pgproto3.ErrorResponse {
	var (
		ce     *clientError
		re     *route.Error
		busy   *pool.BusyError
		pgErr  *pgconn.PgError
		authEr *auth.Error
	)
	switch {
	case errors.As(err, &ce):
		sev := ce.Severity
		if sev == "" {
			sev = "ERROR"
		}
		return &pgproto3.ErrorResponse{Severity: sev, SeverityUnlocalized: sev, Code: ce.SQLState, Message: ce.Message, Detail: ce.Detail, Hint: ce.Hint}
	case errors.As(err, &re):
		return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: re.SQLState, Message: re.Message, Detail: re.Detail, Hint: re.Hint}
	case errors.As(err, &busy):
		return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: sqlstateTooManyConnections,
			Message: "pgowl: DATABASE_BUSY: " + busy.Error(),
			Hint:    "This condition is transient: retry the statement."}
	case errors.As(err, &authEr):
		return &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: authEr.SQLState, Message: authEr.Message}
	case errors.As(err, &pgErr):
		return &pgproto3.ErrorResponse{Severity: pgErr.Severity, SeverityUnlocalized: pgErr.SeverityUnlocalized, Code: pgErr.Code,
			Message: pgErr.Message, Detail: pgErr.Detail, Hint: pgErr.Hint, Where: pgErr.Where,
			SchemaName: pgErr.SchemaName, TableName: pgErr.TableName, ColumnName: pgErr.ColumnName,
			DataTypeName: pgErr.DataTypeName, ConstraintName: pgErr.ConstraintName,
			File: pgErr.File, Line: pgErr.Line, Routine: pgErr.Routine}
	default:
		return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: sqlstateInternalError, Message: "pgowl: " + err.Error()}
	}
}

// errorCode returns the SQLSTATE a client sees for err, for the routing log.
func errorCode(err error) string { return toErrorResponse(err).Code }
