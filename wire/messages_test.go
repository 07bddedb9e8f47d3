package wire

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestMessageTypesMatchTheProtocol checks every named message type against the byte pgproto3
// writes for that message, so a constant cannot name the wrong message or the wrong direction.
func TestMessageTypesMatchTheProtocol(t *testing.T) {
	type encoder interface{ Encode([]byte) ([]byte, error) }
	cases := []struct {
		name string
		typ  byte
		msg  encoder
	}{
		{"MsgQuery", MsgQuery, &pgproto3.Query{}},
		{"MsgParse", MsgParse, &pgproto3.Parse{}},
		{"MsgBind", MsgBind, &pgproto3.Bind{}},
		{"MsgDescribe", MsgDescribe, &pgproto3.Describe{ObjectType: 'S'}},
		{"MsgExecute", MsgExecute, &pgproto3.Execute{}},
		{"MsgClose", MsgClose, &pgproto3.Close{ObjectType: 'S'}},
		{"MsgSync", MsgSync, &pgproto3.Sync{}},
		{"MsgFlush", MsgFlush, &pgproto3.Flush{}},
		{"MsgFunctionCall", MsgFunctionCall, &pgproto3.FunctionCall{}},
		{"MsgCopyFail", MsgCopyFail, &pgproto3.CopyFail{}},
		{"MsgTerminate", MsgTerminate, &pgproto3.Terminate{}},
		{"MsgPasswordMessage", MsgPasswordMessage, &pgproto3.PasswordMessage{}},
		{"MsgCopyData", MsgCopyData, &pgproto3.CopyData{}},
		{"MsgCopyDone", MsgCopyDone, &pgproto3.CopyDone{}},
		{"MsgAuthentication", MsgAuthentication, &pgproto3.AuthenticationOk{}},
		{"MsgParameterStatus", MsgParameterStatus, &pgproto3.ParameterStatus{}},
		{"MsgBackendKeyData", MsgBackendKeyData, &pgproto3.BackendKeyData{}},
		{"MsgReadyForQuery", MsgReadyForQuery, &pgproto3.ReadyForQuery{TxStatus: TxIdle}},
		{"MsgRowDescription", MsgRowDescription, &pgproto3.RowDescription{}},
		{"MsgDataRow", MsgDataRow, &pgproto3.DataRow{}},
		{"MsgCommandComplete", MsgCommandComplete, &pgproto3.CommandComplete{}},
		{"MsgEmptyQueryResponse", MsgEmptyQueryResponse, &pgproto3.EmptyQueryResponse{}},
		{"MsgErrorResponse", MsgErrorResponse, &pgproto3.ErrorResponse{}},
		{"MsgNoticeResponse", MsgNoticeResponse, &pgproto3.NoticeResponse{}},
		{"MsgParseComplete", MsgParseComplete, &pgproto3.ParseComplete{}},
		{"MsgBindComplete", MsgBindComplete, &pgproto3.BindComplete{}},
		{"MsgCloseComplete", MsgCloseComplete, &pgproto3.CloseComplete{}},
		{"MsgNoData", MsgNoData, &pgproto3.NoData{}},
		{"MsgParameterDescription", MsgParameterDescription, &pgproto3.ParameterDescription{}},
		{"MsgPortalSuspended", MsgPortalSuspended, &pgproto3.PortalSuspended{}},
		{"MsgNotificationResponse", MsgNotificationResponse, &pgproto3.NotificationResponse{}},
		{"MsgCopyInResponse", MsgCopyInResponse, &pgproto3.CopyInResponse{}},
		{"MsgCopyOutResponse", MsgCopyOutResponse, &pgproto3.CopyOutResponse{}},
		{"MsgCopyBothResponse", MsgCopyBothResponse, &pgproto3.CopyBothResponse{}},
		{"MsgFunctionCallResponse", MsgFunctionCallResponse, &pgproto3.FunctionCallResponse{}},
	}
	for _, tc := range cases {
		frame, err := tc.msg.Encode(nil)
		if err != nil {
			t.Fatalf("%s: encode %T: %v", tc.name, tc.msg, err)
		}
		if frame[0] != tc.typ {
			t.Errorf("%s is %q, but pgproto3 writes %T as %q", tc.name, tc.typ, tc.msg, frame[0])
		}
	}
	if TargetStatement != 'S' || TargetPortal != 'P' {
		t.Errorf("Describe/Close targets are %q and %q, want 'S' and 'P'", TargetStatement, TargetPortal)
	}
	if TxIdle != 'I' || TxInBlock != 'T' || TxFailed != 'E' {
		t.Error("the transaction status bytes are not PostgreSQL's I, T and E")
	}
}
