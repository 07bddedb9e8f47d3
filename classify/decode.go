package classify

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

//go:generate go run ./internal/gentree -dir .

// errInvalidUTF8 fails a decoded string that is not UTF-8, as proto.Unmarshal fails a proto3
// string.
var errInvalidUTF8 = errors.New("proto: string field contains invalid UTF-8")

func validUTF8(b []byte) bool { return utf8.Valid(b) }

// skipAll consumes the fields of a message with none pgowl's pg_query knows.
func skipAll(b []byte) error {
	return eachField(b, func(protowire.Number, protowire.Type, []byte) error { return nil })
}

// eachField calls visit with each field of the encoded message b, in order: its number, its wire
// type and its value as encoded (what protowire.ConsumeFieldValue consumed, so a value visit
// consumes again is whole). It stops at the first error of the encoding or of visit.
func eachField(b []byte, visit func(num protowire.Number, typ protowire.Type, value []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return protowire.ParseError(n)
		}
		if err := visit(num, typ, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
