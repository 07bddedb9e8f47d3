package classify

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestEnumStrings(t *testing.T) {
	tests := []struct {
		value interface{ String() string }
		want  string
	}{
		{Read, "read"}, {Write, "write"}, {Access(9), "access(9)"},
		{ReasonReadOnly, "READ_ONLY"}, {ReasonWrite, "WRITE"}, {ReasonRowLock, "ROW_LOCK"},
		{ReasonWritingFunction, "WRITING_FUNCTION"}, {ReasonUnknownEffect, "UNKNOWN_EFFECT"}, {Reason(0), "REASON(0)"},
		{TxNone, "NONE"}, {TxBegin, "BEGIN"}, {TxBeginReadOnly, "BEGIN_READ_ONLY"}, {TxEnd, "END"}, {TxOther, "OTHER"},
		{SessionEffect(0), "NONE"}, {SessionSet | SessionListen, "SET|LISTEN"}, {SessionEffect(1 << 31), "0x80000000"},
		{PgowlSet, "SET"}, {PgowlReset, "RESET"}, {PgowlShow, "SHOW"},
	}
	for _, tc := range tests {
		if got := tc.value.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.value, got, tc.want)
		}
	}
}

func TestEffectsJSONRoundTrip(t *testing.T) {
	original := Effects{
		Access: Write, Reason: ReasonRowLock, Subject: "FOR UPDATE", Tx: TxBeginReadOnly,
		Session:    SessionSet | SessionHoldCursor | SessionSerializableDefault,
		Pgowl:      &PgowlCommand{Kind: PgowlSet, Name: "notice", Value: "off", Local: true},
		Statements: 2, Fingerprint: "abc", Normalized: "SELECT $1", ParseError: "",
	}
	data, err := json.Marshal(original)
	if err != nil {
		t.Fatal(err)
	}
	var decoded Effects
	if err := json.Unmarshal(data, &decoded); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if !reflect.DeepEqual(original, decoded) {
		t.Errorf("round trip changed the value:\n%+v\n%+v\n%s", original, decoded, data)
	}
}

func TestInvalidEnumsDoNotMarshal(t *testing.T) {
	if _, err := Access(0).MarshalText(); err == nil {
		t.Error("Access(0) marshalled")
	}
	if _, err := Reason(42).MarshalText(); err == nil {
		t.Error("Reason(42) marshalled")
	}
	var reason Reason
	if err := reason.UnmarshalText([]byte("MAYBE")); err == nil {
		t.Error("unknown reason accepted")
	}
	var session SessionEffect
	if err := json.Unmarshal([]byte(`["SET","NOPE"]`), &session); err == nil {
		t.Error("unknown session effect accepted")
	}
}
