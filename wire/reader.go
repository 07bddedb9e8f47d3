package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HeaderSize is the size of a typed frame's header: the type byte and the length.
const HeaderSize = 5

// MaxStartupPacketLen is the longest untyped packet (startup packet, SSLRequest,
// CancelRequest) ReadUntyped accepts, length field included, as in
// PostgreSQL (MAX_STARTUP_PACKET_LENGTH).
const MaxStartupPacketLen = 10000

// ErrMessageTooLarge reports a frame whose announced body exceeds the reader's limit.
var ErrMessageTooLarge = errors.New("message exceeds the maximum message size")

// FrameError describes a malformed frame, such as a length that is too small to be valid.
type FrameError struct {
	Type   byte
	Length int
	Reason string
}

func (e *FrameError) Error() string {
	if e.Type == 0 {
		return fmt.Sprintf("malformed frame (length %d): %s", e.Length, e.Reason)
	}
	return fmt.Sprintf("malformed %q frame (length %d): %s", e.Type, e.Length, e.Reason)
}

// Reader reads typed protocol frames from a buffered stream.
type Reader struct {
	br      *bufio.Reader
	src     io.Reader
	body    []byte
	maxBody int
}

// NewReader returns a Reader over r with a read buffer of bufSize bytes that
// refuses bodies longer than maxBody bytes.
func NewReader(r io.Reader, bufSize, maxBody int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, bufSize), src: r, maxBody: maxBody}
}

// SetMaxBody changes the largest body the reader accepts, for a protocol
// phase with its own limit (the authentication exchange accepts far less
// than a logged-in session). A frame over the limit is refused from its
// header, before any of its body is read or allocated.
func (r *Reader) SetMaxBody(maxBody int) { r.maxBody = maxBody }

// MaxBody reports the largest body the reader accepts now.
func (r *Reader) MaxBody() int { return r.maxBody }

// Rearm clears an error the buffered reader keeps from a read that was
// interrupted on purpose (a read deadline), keeping any buffered bytes, so
// that the next read goes to the source again.
func (r *Reader) Rearm() {
	if n := r.br.Buffered(); n > 0 {
		kept, _ := r.br.Peek(n)
		kept = append([]byte(nil), kept...)
		r.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(kept), r.src), r.br.Size())
		return
	}
	r.br.Reset(r.src)
}

// PeekFrame returns the next frame, header included, without consuming it,
// when the whole frame fits in the read buffer. Discard consumes it.
func (r *Reader) PeekFrame() ([]byte, error) {
	_, n, err := r.PeekHeader()
	if err != nil {
		return nil, err
	}
	if HeaderSize+n > r.br.Size() {
		return nil, bufio.ErrBufferFull
	}
	return r.br.Peek(HeaderSize + n)
}

// Discard consumes n bytes, such as a frame returned by PeekFrame.
func (r *Reader) Discard(n int) error {
	_, err := r.br.Discard(n)
	return err
}

// Buffered reports how many bytes can be read without touching the network.
// A caller that is about to block on the peer flushes its own output first.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// PeekHeader returns the type and body length of the next frame without consuming it.
func (r *Reader) PeekHeader() (typ byte, bodyLen int, err error) {
	hdr, err := r.br.Peek(HeaderSize)
	if err != nil {
		return 0, 0, err
	}
	typ = hdr[0]
	n := int(binary.BigEndian.Uint32(hdr[1:]))
	if n < 4 {
		return typ, 0, &FrameError{Type: typ, Length: n, Reason: "length is smaller than the length field itself"}
	}
	bodyLen = n - 4
	if bodyLen > r.maxBody {
		return typ, bodyLen, fmt.Errorf("%w: %q frame of %d bytes (limit %d)", ErrMessageTooLarge, typ, bodyLen, r.maxBody)
	}
	return typ, bodyLen, nil
}

// ReadFrame reads the next frame whole. The body is valid until the next call.
func (r *Reader) ReadFrame() (typ byte, body []byte, err error) {
	typ, n, err := r.PeekHeader()
	if err != nil {
		return typ, nil, err
	}
	if _, err := r.br.Discard(HeaderSize); err != nil {
		return typ, nil, err
	}
	if cap(r.body) < n {
		r.body = make([]byte, n, max(n, 2*cap(r.body)))
	}
	body = r.body[:n]
	if _, err := io.ReadFull(r.br, body); err != nil {
		return typ, nil, unexpectedEOF(err)
	}
	// Do not keep a huge buffer alive for the rest of the connection.
	if cap(r.body) > 1<<20 {
		r.body = nil
	}
	return typ, body, nil
}

// CopyFrame copies the next frame, header included, to w without holding the
// whole body in memory. It returns the frame's type and body length.
func (r *Reader) CopyFrame(w *bufio.Writer) (typ byte, bodyLen int, err error) {
	typ, n, err := r.PeekHeader()
	if err != nil {
		return typ, 0, err
	}
	total := HeaderSize + n
	if total <= r.br.Size() {
		// The whole frame fits in the read buffer: one write from it, no copy into a body buffer.
		frame, err := r.br.Peek(total)
		if err != nil {
			return typ, n, unexpectedEOF(err)
		}
		if _, err := w.Write(frame); err != nil {
			return typ, n, err
		}
		_, err = r.br.Discard(total)
		return typ, n, err
	}
	if _, err := io.CopyN(w, r.br, int64(total)); err != nil {
		return typ, n, unexpectedEOF(err)
	}
	return typ, n, nil
}

// CopyRun copies, in one write, the run of whole frames of type typ that
// starts at the read position and is already buffered, and reports how many
// it copied. It copies nothing when the next frame is of another type or not
// wholly buffered; CopyFrame then takes over.
func (r *Reader) CopyRun(w *bufio.Writer, typ byte) (int, error) {
	buf, _ := r.br.Peek(r.br.Buffered())
	end, frames := 0, 0
	for len(buf)-end >= HeaderSize && buf[end] == typ {
		n := int(binary.BigEndian.Uint32(buf[end+1:]))
		if n < 4 || n-4 > r.maxBody || end+1+n > len(buf) {
			break
		}
		end += 1 + n
		frames++
	}
	if frames == 0 {
		return 0, nil
	}
	if _, err := w.Write(buf[:end]); err != nil {
		return 0, err
	}
	_, err := r.br.Discard(end)
	return frames, err
}

// ReadUntyped reads a frame without a type byte, as the startup packet,
// SSLRequest and CancelRequest are sent. The body is valid until the next call.
func (r *Reader) ReadUntyped() ([]byte, error) {
	hdr, err := r.br.Peek(4)
	if err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr))
	if n < 8 {
		return nil, &FrameError{Length: n, Reason: "startup packet is shorter than 8 bytes"}
	}
	if n > MaxStartupPacketLen {
		return nil, &FrameError{Length: n, Reason: "startup packet is too long"}
	}
	if _, err := r.br.Discard(4); err != nil {
		return nil, err
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r.br, body); err != nil {
		return nil, unexpectedEOF(err)
	}
	return body, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendHeader appends a frame header for a body of bodyLen bytes.
func AppendHeader(dst []byte, typ byte, bodyLen int) []byte {
	return append(dst, typ, byte((bodyLen+4)>>24), byte((bodyLen+4)>>16), byte((bodyLen+4)>>8), byte(bodyLen+4))
}

// AppendFrame appends a whole frame with the given body.
func AppendFrame(dst []byte, typ byte, body []byte) []byte {
	dst = AppendHeader(dst, typ, len(body))
	return append(dst, body...)
}
