package auth

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// SQLSTATE codes that Authenticate puts into an Error.
const (
	// SQLStateInvalidPassword (28P01) is sent for a wrong password and for an unknown user alike.
	SQLStateInvalidPassword = "28P01"
	// SQLStateProtocolViolation (08P01) is sent when the client's authentication messages are malformed.
	SQLStateProtocolViolation = "08P01"
	// SQLStateInvalidAuthorization (28000) is sent when certificate authentication fails.
	SQLStateInvalidAuthorization = "28000"
	// SQLStateFeatureNotSupported (0A000) is sent when the client asks for a SCRAM feature pgowl does not implement.
	SQLStateFeatureNotSupported = "0A000"
)

// Internal reasons for a failed password check; they go to the log, never to the client.
const (
	// ReasonUnknownUser means the startup user is not configured and a fake exchange was run.
	ReasonUnknownUser = "unknown user"
	// ReasonWrongPassword means the user is configured but the proof or hash did not match.
	ReasonWrongPassword = "wrong password"
)

// Error is an authentication failure to be reported to the client as a FATAL ErrorResponse.
type Error struct {
	// SQLState is the five-character code sent to the client.
	SQLState string
	// Message is the client-visible message; it never tells an unknown user from a wrong password.
	Message string
	// Reason is the internal explanation for the log, such as ReasonUnknownUser or "protocol violation: ...".
	Reason string
}

// Error formats the failure for logs, including the internal reason.
func (e *Error) Error() string {
	return fmt.Sprintf("auth: %s (SQLSTATE %s: %s)", e.Reason, e.SQLState, e.Message)
}

// ErrorResponse converts the failure into the FATAL message that ends the client's startup.
func (e *Error) ErrorResponse() *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{
		Severity:            "FATAL",
		SeverityUnlocalized: "FATAL",
		Code:                e.SQLState,
		Message:             e.Message,
	}
}

// passwordFailed builds the one client-visible error used for both unknown users and wrong passwords.
func passwordFailed(user, reason string) *Error {
	return &Error{
		SQLState: SQLStateInvalidPassword,
		Message:  `password authentication failed for user "` + user + `"`,
		Reason:   reason,
	}
}

// protocolViolation builds the error for a malformed authentication message; detail goes to the log only.
func protocolViolation(message, detail string) *Error {
	return &Error{
		SQLState: SQLStateProtocolViolation,
		Message:  message,
		Reason:   "protocol violation: " + detail,
	}
}

// malformedSCRAM builds the error PostgreSQL reports for an unparsable SCRAM message.
func malformedSCRAM(detail string) *Error {
	return protocolViolation("malformed SCRAM message", detail)
}

// unsupportedSCRAM builds the error for a well-formed SCRAM message that needs a feature pgowl lacks.
func unsupportedSCRAM(message string) *Error {
	return &Error{
		SQLState: SQLStateFeatureNotSupported,
		Message:  message,
		Reason:   "unsupported: " + message,
	}
}

// certificateFailed builds the client-visible error of a failed cert method, as PostgreSQL words it.
func certificateFailed(user, reason string) *Error {
	return &Error{
		SQLState: SQLStateInvalidAuthorization,
		Message:  `certificate authentication failed for user "` + user + `"`,
		Reason:   "certificate: " + reason,
	}
}
