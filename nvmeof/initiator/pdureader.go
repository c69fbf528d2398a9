package initiator

import (
	"io"
	"net"

	"github.com/nvstripe/nvstripe/internal/rawsock"
)

// pduReader reads what a controller sends on a queue: headers and small
// payloads through a buffer, the data of C2HData PDUs straight into the
// command's buffer. On a plain TCP connection the data's readv also takes
// the bytes that follow it (the next PDU's header) into the buffer, so a
// large read costs about one system call per PDU and its bytes are copied
// once, where a buffered reader that refills 64 KiB at each header copies
// up to 64 KiB of every PDU's data twice.
//
// Only the holder of the queue's reader token uses it.
type pduReader struct {
	raw  *rawsock.Conn // nil (TLS, wrapped connections): read conn
	conn io.Reader
	buf  []byte
	r, w int // buf[r:w] is read but not consumed
	// lastData is the size of the last PDU data read into a caller's
	// buffer; the next PDU is likely as large, so a refill asks for less
	// (its data would be copied twice) after large ones.
	lastData int
}

const (
	pduBufSize = 64 << 10
	// minSpill is the least a refill or a data read asks for beyond what
	// it needs: room for a burst of headers (a completion is 24 bytes).
	minSpill = 4 << 10
)

func newPDUReader(conn net.Conn, raw *rawsock.Conn) *pduReader {
	return &pduReader{raw: raw, conn: conn, buf: make([]byte, pduBufSize)}
}

// Read implements io.Reader (headers, padded or digested payloads):
// buffered bytes first, refilling the buffer when it is empty.
func (rd *pduReader) Read(p []byte) (int, error) {
	if rd.r == rd.w {
		if len(p) >= len(rd.buf) {
			return rd.readInto(p, nil)
		}
		rd.r, rd.w = 0, 0
		n, err := rd.readInto(rd.buf[:max(minSpill, len(rd.buf)-rd.lastData)], nil)
		if n == 0 {
			return 0, err
		}
		rd.w = n
	}
	n := copy(p, rd.buf[rd.r:rd.w])
	rd.r += n
	return n, nil
}

// readFull fills dst, a PDU's data: the buffered bytes, then the rest
// straight from the connection, with whatever follows (up to the buffer's
// size, less the data's) into the buffer in the same call.
func (rd *pduReader) readFull(dst []byte) error {
	n := copy(dst, rd.buf[rd.r:rd.w])
	rd.r += n
	rd.lastData = len(dst)
	for n < len(dst) {
		rem := dst[n:]
		rd.r, rd.w = 0, 0 // empty: the copy above took everything
		got, err := rd.readInto(rem, rd.buf[:max(minSpill, len(rd.buf)-len(rem))])
		if got > len(rem) {
			rd.w = got - len(rem)
			got = len(rem)
		}
		n += got
		if err != nil && n < len(dst) {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// readInto reads into p and, on a raw socket, on into spill.
func (rd *pduReader) readInto(p, spill []byte) (int, error) {
	if rd.raw != nil {
		return rd.raw.Readv(p, spill)
	}
	return rd.conn.Read(p)
}
