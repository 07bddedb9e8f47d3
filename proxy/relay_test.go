package proxy

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/wire"
)

// resultStream is what a node sends for a query returning rows DataRows.
func resultStream(rows int) []byte {
	var b []byte
	b = wire.AppendFrame(b, 'T', []byte{0, 1, 'v', 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 25, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0})
	row := wire.AppendFrame(nil, 'D', []byte{0, 1, 0, 0, 0, 12, 'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!'})
	for i := 0; i < rows; i++ {
		b = append(b, row...)
	}
	b = wire.AppendFrame(b, 'C', []byte("SELECT 1\x00"))
	return wireReady(b, 'I')
}

func relaySession(out io.Writer) *session {
	srv := &Server{}
	srv.settings.Store(&liveSettings{})
	return &session{srv: srv, client: clientConn{w: bufio.NewWriterSize(out, clientWriteBuffer)}, log: zerolog.Nop()}
}

func TestRelayForwardsFramesUntouched(t *testing.T) {
	stream := resultStream(1000)
	var out bytes.Buffer
	sess := relaySession(&out)
	be := &backend{conn: &pool.Conn{Reader: wire.NewReader(bytes.NewReader(stream), 32<<10, 1<<20)}}
	be.expect.push(expectation{typ: 'Q'})
	u := unit{}
	if _, err := sess.relay(be, &u); err != nil {
		t.Fatal(err)
	}
	sess.client.w.Flush()
	if !bytes.Equal(out.Bytes(), stream) {
		t.Fatalf("relayed %d bytes differ from the %d the node sent", out.Len(), len(stream))
	}
	if be.conn.TxStatus != 'I' || be.expect.len() != 0 {
		t.Fatalf("after the unit: status %q, %d replies still expected", be.conn.TxStatus, be.expect.len())
	}
}

func TestRelaySwallowsInjectedParseAndAnswersClose(t *testing.T) {
	var stream []byte
	stream = wire.AppendFrame(stream, '1', nil) // the injected Parse's reply: not the client's
	stream = wire.AppendFrame(stream, '2', nil) // BindComplete
	stream = wire.AppendFrame(stream, 'C', []byte("SELECT 0\x00"))
	stream = wireReady(stream, 'I')
	var out bytes.Buffer
	sess := relaySession(&out)
	be := &backend{conn: &pool.Conn{Reader: wire.NewReader(bytes.NewReader(stream), 4096, 1<<20)}}
	be.expect.push(expectation{typ: 'P', swallow: true, serverName: "pgowl_x"})
	be.expect.push(expectation{typ: 'B'})
	be.expect.push(expectation{typ: 'E'})
	be.expect.push(expectation{typ: 'C', synthetic: '3'}) // a client Close pgowl answers in turn
	be.expect.push(expectation{typ: 'S'})
	if _, err := sess.relay(be, &unit{}); err != nil {
		t.Fatal(err)
	}
	sess.client.w.Flush()
	var want []byte
	want = wire.AppendFrame(want, '2', nil)
	want = wire.AppendFrame(want, 'C', []byte("SELECT 0\x00"))
	want = wire.AppendFrame(want, '3', nil)
	want = wireReady(want, 'I')
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("client got %q, want %q", out.Bytes(), want)
	}
}

func TestRelayErrorDropsTheRestOfTheBatch(t *testing.T) {
	var stream []byte
	stream = wire.AppendFrame(stream, 'E', []byte("SERROR\x00VERROR\x00C22012\x00Mdivision by zero\x00\x00"))
	stream = wireReady(stream, 'I')
	var out bytes.Buffer
	sess := relaySession(&out)
	be := &backend{conn: &pool.Conn{Reader: wire.NewReader(bytes.NewReader(stream), 4096, 1<<20), Attached: &connRecord{statements: serverStatements{prepared: map[string]struct{}{"pgowl_a": {}}}}}}
	be.expect.push(expectation{typ: 'P', serverName: "pgowl_a"}) // fails: the node never prepared it
	be.expect.push(expectation{typ: 'B'})
	be.expect.push(expectation{typ: 'E'})
	be.expect.push(expectation{typ: 'S'})
	outcome, err := sess.relay(be, &unit{})
	if err != nil {
		t.Fatal(err)
	}
	if outcome.errCode != "22012" {
		t.Fatalf("unit error code %q, want 22012", outcome.errCode)
	}
	if be.statements().holds("pgowl_a") {
		t.Fatal("a Parse that failed is still recorded as prepared on the connection")
	}
}

// BenchmarkRelayDataRows measures the hot path: a node's result relayed to
// the client. allocs/op is per 1000-row result.
func BenchmarkRelayDataRows(b *testing.B) {
	stream := resultStream(1000)
	src := bytes.NewReader(stream)
	sess := relaySession(io.Discard)
	be := &backend{conn: &pool.Conn{Reader: wire.NewReader(src, 32<<10, 1<<20)}}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		src.Reset(stream)
		be.expect.push(expectation{typ: 'Q'})
		if _, err := sess.relay(be, &unit{}); err != nil {
			b.Fatal(err)
		}
	}
}
