package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

func frames(parts ...[]byte) *bytes.Reader {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return bytes.NewReader(b)
}

func TestReadFrame(t *testing.T) {
	in := frames(AppendFrame(nil, 'Q', []byte("select 1\x00")), AppendFrame(nil, 'S', nil))
	r := NewReader(in, 64, 1024)
	typ, body, err := r.ReadFrame()
	if err != nil || typ != 'Q' || string(body) != "select 1\x00" {
		t.Fatalf("first frame: %q %q %v", typ, body, err)
	}
	typ, body, err = r.ReadFrame()
	if err != nil || typ != 'S' || len(body) != 0 {
		t.Fatalf("second frame: %q %q %v", typ, body, err)
	}
	if _, _, err = r.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF, got %v", err)
	}
}

func TestReadFrameRefusesOversizedBody(t *testing.T) {
	r := NewReader(frames(AppendHeader(nil, 'Q', 2048)), 64, 1024)
	if _, _, err := r.ReadFrame(); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("want ErrMessageTooLarge, got %v", err)
	}
}

func TestReadFrameRefusesBadLength(t *testing.T) {
	r := NewReader(bytes.NewReader([]byte{'Q', 0, 0, 0, 3}), 64, 1024)
	var fe *FrameError
	if _, _, err := r.ReadFrame(); !errors.As(err, &fe) {
		t.Fatalf("want FrameError, got %v", err)
	}
}

func TestReadFrameTruncated(t *testing.T) {
	full := AppendFrame(nil, 'D', []byte("abcdef"))
	r := NewReader(bytes.NewReader(full[:len(full)-2]), 64, 1024)
	if _, _, err := r.ReadFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("want ErrUnexpectedEOF, got %v", err)
	}
}

func TestCopyFrameSmallAndLarge(t *testing.T) {
	small := AppendFrame(nil, 'D', []byte("row"))
	large := AppendFrame(nil, 'D', bytes.Repeat([]byte("x"), 5000)) // larger than the read buffer
	r := NewReader(frames(small, large), 64, 1<<20)
	var out bytes.Buffer
	w := bufio.NewWriterSize(&out, 128)
	for _, want := range [][]byte{small, large} {
		typ, n, err := r.CopyFrame(w)
		if err != nil || typ != 'D' || n != len(want)-HeaderSize {
			t.Fatalf("CopyFrame: %q %d %v", typ, n, err)
		}
	}
	w.Flush()
	if !bytes.Equal(out.Bytes(), append(small, large...)) {
		t.Fatal("copied bytes differ from the input")
	}
}

func TestReadUntyped(t *testing.T) {
	pkt := []byte{0, 0, 0, 8, 4, 210, 22, 47} // SSLRequest
	r := NewReader(bytes.NewReader(pkt), 64, 1024)
	body, err := r.ReadUntyped()
	if err != nil || !bytes.Equal(body, pkt[4:]) {
		t.Fatalf("ReadUntyped: %v %v", body, err)
	}
	r = NewReader(bytes.NewReader([]byte{0, 0xff, 0xff, 0xff, 0, 3, 0, 0}), 64, 1<<30)
	var fe *FrameError
	if _, err := r.ReadUntyped(); !errors.As(err, &fe) {
		t.Fatalf("want FrameError for a huge startup packet, got %v", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, 'Q', []byte("select 1\x00")))
	f.Add([]byte{'D', 0, 0, 0, 4})
	f.Add([]byte{'D', 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 8, 4, 210, 22, 47})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), 16, 256)
		for i := 0; i < 64; i++ {
			typ, body, err := r.ReadFrame()
			if err != nil {
				return
			}
			if len(body) > 256 {
				t.Fatalf("%q frame body of %d bytes passed a 256-byte limit", typ, len(body))
			}
		}
	})
}

// BenchmarkCopyFrameDataRow measures forwarding one small DataRow.
func BenchmarkCopyFrameDataRow(b *testing.B) {
	row := AppendFrame(nil, 'D', []byte{0, 2, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'})
	stream := bytes.Repeat(row, 1024)
	src := bytes.NewReader(stream)
	r := NewReader(src, 32<<10, 1<<20)
	w := bufio.NewWriterSize(io.Discard, 32<<10)
	b.SetBytes(int64(len(row)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%1024 == 0 {
			src.Reset(stream)
		}
		if _, _, err := r.CopyFrame(w); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCopyRun(t *testing.T) {
	row := AppendFrame(nil, 'D', []byte("row"))
	tail := AppendFrame(nil, 'C', []byte("SELECT 3\x00"))
	in := append(append(append(append([]byte(nil), row...), row...), row...), tail...)
	r := NewReader(bytes.NewReader(in), 64, 1024)
	if _, _, err := r.PeekHeader(); err != nil { // fill the buffer
		t.Fatal(err)
	}
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	n, err := r.CopyRun(w, 'D')
	if err != nil || n != 3 {
		t.Fatalf("CopyRun = %d, %v; want 3 rows", n, err)
	}
	w.Flush()
	if !bytes.Equal(out.Bytes(), in[:3*len(row)]) {
		t.Fatal("CopyRun wrote other bytes than the three rows")
	}
	typ, _, err := r.ReadFrame()
	if err != nil || typ != 'C' {
		t.Fatalf("after the run: %q %v", typ, err)
	}
	// A frame only partly buffered is left for CopyFrame.
	big := AppendFrame(nil, 'D', bytes.Repeat([]byte("x"), 100))
	r = NewReader(bytes.NewReader(big), 32, 1024)
	r.PeekHeader()
	if n, err := r.CopyRun(w, 'D'); n != 0 || err != nil {
		t.Fatalf("CopyRun of a partly buffered frame = %d, %v; want 0, nil", n, err)
	}
}
