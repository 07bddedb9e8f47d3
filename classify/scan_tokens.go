package classify

import (
	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/pganalyze/pg_query_go/v5/parser"
	"google.golang.org/protobuf/encoding/protowire"
)

// scanToken is one token of PostgreSQL's scanner, as pg_query.ScanToken gives it: its byte range
// in the text, its kind and, for a keyword, which kind of keyword.
type scanToken struct {
	Start, End  int32
	Token       pg_query.Token
	KeywordKind pg_query.KeywordKind
}

// The fields of pg_query's ScanResult and ScanToken messages that scanSQL reads.
const (
	scanResultTokens       protowire.Number = 2
	scanTokenStart         protowire.Number = 1
	scanTokenEnd           protowire.Number = 2
	scanTokenToken         protowire.Number = 4
	scanTokenKeywordKind   protowire.Number = 5
	scanTokensPerByteGuess                  = 8 // a token takes 6 to 12 bytes of the encoding
)

// scanSQL is pg_query.Scan with the scanner's protobuf decoded into one slice of values rather
// than by proto.Unmarshal into a message per token: the labels scan every statement that may
// hold a literal, and reflection and those allocations took about as long as the scan itself
// (TestScannerTokensMatchPgQueryScan checks that both give the same tokens).
func scanSQL(sql string) ([]scanToken, error) {
	encoded, err := parser.ScanToProtobuf(sql)
	if err != nil {
		return nil, err
	}
	tokens := make([]scanToken, 0, len(encoded)/scanTokensPerByteGuess+1)
	err = eachField(encoded, func(num protowire.Number, typ protowire.Type, value []byte) error {
		if num != scanResultTokens || typ != protowire.BytesType {
			return nil
		}
		message, _ := protowire.ConsumeBytes(value) // whole: eachField consumed it
		token, err := decodeScanTokenValue(message)
		tokens = append(tokens, token)
		return err
	})
	if err != nil {
		return nil, err
	}
	return tokens, nil
}

// decodeScanTokenValue decodes one ScanToken message.
func decodeScanTokenValue(b []byte) (scanToken, error) {
	var t scanToken
	err := eachField(b, func(num protowire.Number, typ protowire.Type, value []byte) error {
		if typ != protowire.VarintType {
			return nil
		}
		v, _ := protowire.ConsumeVarint(value) // whole: eachField consumed it
		switch num {
		case scanTokenStart:
			t.Start = int32(v)
		case scanTokenEnd:
			t.End = int32(v)
		case scanTokenToken:
			t.Token = pg_query.Token(int32(v))
		case scanTokenKeywordKind:
			t.KeywordKind = pg_query.KeywordKind(int32(v))
		}
		return nil
	})
	return t, err
}
