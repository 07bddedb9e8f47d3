package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/pgowl/pgowl/wire"
)

var errMalformed = errors.New("malformed message")

// cstring splits a NUL-terminated string off the front of b.
func cstring(b []byte) (string, []byte, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, errMalformed
	}
	return string(b[:i]), b[i+1:], nil
}

// parseMessage is the part of a Parse message the proxy needs.
type parseMessage struct {
	name       string
	query      string
	paramTypes []uint32
}

func decodeParse(body []byte) (parseMessage, error) {
	var m parseMessage
	var err error
	if m.name, body, err = cstring(body); err != nil {
		return m, err
	}
	if m.query, body, err = cstring(body); err != nil {
		return m, err
	}
	if len(body) < 2 {
		return m, errMalformed
	}
	n := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	if len(body) != 4*n {
		return m, errMalformed
	}
	for i := 0; i < n; i++ {
		m.paramTypes = append(m.paramTypes, binary.BigEndian.Uint32(body[4*i:]))
	}
	return m, nil
}

// decodeBindNames returns the portal and statement names of a Bind message.
func decodeBindNames(body []byte) (portal, stmt string, err error) {
	if portal, body, err = cstring(body); err != nil {
		return
	}
	stmt, _, err = cstring(body)
	return
}

// decodeTargeted decodes Describe and Close: a kind byte ('S' or 'P') and a name.
func decodeTargeted(body []byte) (kind byte, name string, err error) {
	if len(body) < 2 {
		return 0, "", errMalformed
	}
	kind = body[0]
	if kind != wire.TargetStatement && kind != wire.TargetPortal {
		return 0, "", errMalformed
	}
	name, _, err = cstring(body[1:])
	return
}

// encodeTargeted builds the body of a Close or Describe message.
func appendTargetedFrame(dst []byte, typ, kind byte, name string) []byte {
	n := 1 + len(name) + 1
	dst = append(dst, typ, byte((n+4)>>24), byte((n+4)>>16), byte((n+4)>>8), byte(n+4), kind)
	dst = append(dst, name...)
	return append(dst, 0)
}

// errorFields returns the SQLSTATE and message of an ErrorResponse body.
func errorFields(body []byte) (code, message string) {
	_, code, message = errorSeverityFields(body)
	return
}

// errorSeverityFields also returns the non-localised severity (ERROR, FATAL, PANIC).
func errorSeverityFields(body []byte) (severity, code, message string) {
	for len(body) > 0 && body[0] != 0 {
		field := body[0]
		end := bytes.IndexByte(body[1:], 0)
		if end < 0 {
			return
		}
		value := body[1 : 1+end]
		switch field {
		case 'V':
			severity = string(value)
		case 'S':
			if severity == "" {
				severity = string(value)
			}
		case 'C':
			code = string(value)
		case 'M':
			message = string(value)
		}
		body = body[2+end:]
	}
	return
}

// commandTag returns the tag of a CommandComplete body without its NUL.
func commandTag(body []byte) []byte {
	if i := bytes.IndexByte(body, 0); i >= 0 {
		return body[:i]
	}
	return body
}

func appendFrame(dst []byte, typ byte, body []byte) []byte { return wire.AppendFrame(dst, typ, body) }

func wireReady(dst []byte, status byte) []byte {
	return append(dst, wire.MsgReadyForQuery, 0, 0, 0, 5, status)
}

// firstWords returns the start of a statement, for log lines about
// statements pgowl itself runs (never client text).
func firstWords(sql string) string {
	if len(sql) > 40 {
		return sql[:40]
	}
	return sql
}
