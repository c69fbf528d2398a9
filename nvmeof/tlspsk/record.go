package tlspsk

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Record content types (RFC 8446 section 5.1).
const (
	recordCCS       = 20
	recordAlert     = 21
	recordHandshake = 22
	recordAppData   = 23
)

const (
	recordHeaderLen  = 5
	maxPlaintext     = 1 << 14
	maxCiphertext    = maxPlaintext + 256
	maxInnerPlain    = maxPlaintext + 1
	recordsPerKey    = 1 << 23 // well under AES-GCM's 2^24.5 records per key
	tagLen           = 16
	maxHandshakeSize = 1 << 16
)

// halfConn is one direction's record protection: nil aead while the
// records are plaintext.
type halfConn struct {
	suite  *Suite
	aead   cipher.AEAD
	iv     []byte
	secret []byte // the traffic secret, for KeyUpdate
	seq    uint64
}

func (h *halfConn) setSecret(s *Suite, secret []byte) {
	h.suite, h.secret, h.seq = s, secret, 0
	h.aead, h.iv = s.aead(secret)
}

// update moves to the next application traffic secret (KeyUpdate).
func (h *halfConn) update() {
	h.setSecret(h.suite, expandLabel(h.suite.hash, h.secret, "traffic upd", nil, h.suite.hashLen))
}

func (h *halfConn) nonce() []byte {
	var n [12]byte
	copy(n[:], h.iv)
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], h.seq)
	for i := range seq {
		n[4+i] ^= seq[i]
	}
	return n[:]
}

// appendRecord appends one record carrying payload (at most maxPlaintext
// bytes) of content type typ, protected when h has keys.
func (h *halfConn) appendRecord(dst []byte, typ byte, payload []byte) []byte {
	dst, start := beginRecord(dst, len(payload))
	dst = append(dst, payload...)
	return h.sealRecord(dst, start, typ)
}

// beginRecord appends a record header to dst, with room for n bytes of
// payload and the protection; the payload is appended next, then
// sealRecord finishes the record that starts at start.
func beginRecord(dst []byte, n int) ([]byte, int) {
	start := len(dst)
	dst = slices.Grow(dst, recordHeaderLen+n+1+tagLen) // Seal then works in place
	return append(dst, 0, 3, 3, 0, 0), start
}

func (h *halfConn) sealRecord(dst []byte, start int, typ byte) []byte {
	rec := dst[start:]
	n := len(rec) - recordHeaderLen
	if h.aead == nil {
		rec[0], rec[3], rec[4] = typ, byte(n>>8), byte(n)
		return dst
	}
	dst = append(dst, typ)
	n += 1 + tagLen
	rec = dst[start:]
	rec[0], rec[3], rec[4] = recordAppData, byte(n>>8), byte(n)
	inner := rec[recordHeaderLen:]
	h.aead.Seal(inner[:0], h.nonce(), inner, rec[:recordHeaderLen])
	h.seq++
	return dst[:start+recordHeaderLen+n]
}

// open checks and decrypts record rec (header and body, body decrypted in
// place) and returns its content type and content.
func (h *halfConn) open(rec []byte) (byte, []byte, error) {
	typ, body := rec[0], rec[recordHeaderLen:]
	if h.aead == nil || typ == recordCCS {
		if len(body) > maxPlaintext {
			return 0, nil, alertf(alertRecordOverflow, "plaintext record of %d bytes", len(body))
		}
		return typ, body, nil
	}
	if typ != recordAppData {
		return 0, nil, alertf(alertUnexpectedMessage, "plaintext record of type %d after keys were set", typ)
	}
	if len(body) < tagLen+1 {
		return 0, nil, alertf(alertBadRecordMAC, "record of %d bytes is too short to be protected", len(body))
	}
	plain, err := h.aead.Open(body[:0], h.nonce(), body, rec[:recordHeaderLen])
	if err != nil {
		return 0, nil, alertf(alertBadRecordMAC, "record does not decrypt (wrong key or corrupted in transit)")
	}
	h.seq++
	if len(plain) > maxInnerPlain {
		return 0, nil, alertf(alertRecordOverflow, "record of %d bytes", len(plain))
	}
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 {
		return 0, nil, alertf(alertUnexpectedMessage, "protected record without a content type")
	}
	return plain[i], plain[:i], nil
}

// readRecord reads one record into buf (grown to fit) and checks its
// header: known type, version, length within the limits.
func readRecord(r io.Reader, buf []byte, first bool) ([]byte, error) {
	buf = buf[:recordHeaderLen]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("tls: connection closed inside a record header: %w", err)
		}
		return nil, err
	}
	typ, vers, n := buf[0], binary.BigEndian.Uint16(buf[1:]), int(binary.BigEndian.Uint16(buf[3:]))
	switch {
	case typ < recordCCS || typ > recordAppData:
		return nil, alertf(alertUnexpectedMessage, "record type %d", typ)
	case vers != 0x0303 && !(first && vers == 0x0301):
		return nil, alertf(alertProtocolVersion, "record version %#04x", vers)
	case n > maxCiphertext:
		return nil, alertf(alertRecordOverflow, "record of %d bytes", n)
	case n == 0 && typ != recordAppData:
		return nil, alertf(alertUnexpectedMessage, "empty record of type %d", typ)
	}
	if cap(buf) < recordHeaderLen+n {
		nb := make([]byte, recordHeaderLen+n, max(recordHeaderLen+n, min(2*cap(buf), recordHeaderLen+maxCiphertext)))
		copy(nb, buf)
		buf = nb
	}
	buf = buf[:recordHeaderLen+n]
	if _, err := io.ReadFull(r, buf[recordHeaderLen:]); err != nil {
		return nil, fmt.Errorf("tls: connection closed inside a record: %w", noEOF(err))
	}
	return buf, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
