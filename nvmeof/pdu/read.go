package pdu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Fatal error status values of a TermReq (NVMe/TCP transport spec, FES).
const (
	FESInvalidHeaderField   uint16 = 0x01 // FEI: byte offset of the bad field
	FESSequenceError        uint16 = 0x02
	FESHeaderDigest         uint16 = 0x03 // FEI: the digest received
	FESDataOutOfRange       uint16 = 0x04
	FESDataLimitExceeded    uint16 = 0x05 // also "R2T limit exceeded"
	FESUnsupportedParameter uint16 = 0x06 // FEI: byte offset of the bad field
)

// Common header field offsets, used as FEI values.
const (
	OffType  = 0
	OffFlags = 1
	OffHLen  = 2
	OffPDO   = 3
	OffPLen  = 4
)

// ErrProtocol is the class of every fatal transport error: a malformed,
// oversized or out-of-sequence PDU. The connection cannot continue.
var ErrProtocol = errors.New("nvme/tcp protocol error")

// ErrDataDigest is the class of a data digest mismatch. The PDU was consumed
// completely, so the stream is still in step; the command it belongs to
// failed.
var ErrDataDigest = errors.New("nvme/tcp data digest mismatch")

// FatalError is a fatal NVMe/TCP transport error. FES and FEI are what a
// TermReq reports; Hdr is a copy of the offending PDU header (at most 128
// bytes) for the TermReq's error data. errors.Is(e, ErrProtocol) is true.
type FatalError struct {
	FES    uint16
	FEI    uint32
	Hdr    []byte
	Reason string
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("nvme/tcp fatal error (fes 0x%02x fei 0x%x): %s", e.FES, e.FEI, e.Reason)
}

// Is makes errors.Is(e, ErrProtocol) true.
func (e *FatalError) Is(target error) bool { return target == ErrProtocol }

// NewFatalError builds a FatalError, copying at most 128 bytes of hdr.
func NewFatalError(fes uint16, fei uint32, hdr []byte, format string, args ...any) *FatalError {
	if len(hdr) > TermReqMaxData {
		hdr = hdr[:TermReqMaxData]
	}
	return &FatalError{FES: fes, FEI: fei, Hdr: append([]byte(nil), hdr...), Reason: fmt.Sprintf(format, args...)}
}

// DataDigestError reports a data digest mismatch; errors.Is(e,
// ErrDataDigest) is true.
type DataDigestError struct {
	Got, Want uint32
}

func (e *DataDigestError) Error() string {
	return fmt.Sprintf("nvme/tcp data digest mismatch: got 0x%08x want 0x%08x", e.Got, e.Want)
}

// Is makes errors.Is(e, ErrDataDigest) true.
func (e *DataDigestError) Is(target error) bool { return target == ErrDataDigest }

// Validate checks a common header against the rules of its type, the
// negotiated digests and the largest data length the reader accepts. It
// returns nil or a *FatalError naming the bad field.
func (h Header) Validate(dg Digests, maxData int) error {
	if fe := h.validate(dg, maxData); fe != nil {
		return fe
	}
	return nil
}

func (h Header) validate(dg Digests, maxData int) *FatalError {
	var raw [CommonHeaderLen]byte
	h.Put(raw[:])
	bad := func(fes uint16, fei uint32, format string, args ...any) *FatalError {
		return NewFatalError(fes, fei, raw[:], "%s: "+format, append([]any{h.Type}, args...)...)
	}
	rule, ok := ruleFor(h.Type)
	if !ok {
		return bad(FESInvalidHeaderField, OffType, "unknown pdu type")
	}
	if h.HLen != rule.hlen {
		return bad(FESInvalidHeaderField, OffHLen, "hlen %d, want %d", h.HLen, rule.hlen)
	}
	hasH, hasD := h.Flags&FlagHDGST != 0, h.Flags&FlagDDGST != 0
	if !rule.digests && (hasH || hasD) {
		return bad(FESInvalidHeaderField, OffFlags, "digest flags 0x%02x on a pdu that takes none", uint8(h.Flags))
	}
	if rule.digests && hasH != dg.Header {
		return bad(FESInvalidHeaderField, OffFlags, "HDGSTF=%t but header digest negotiated=%t", hasH, dg.Header)
	}
	if h.Type == TypeC2HData && h.Flags&FlagSuccess != 0 && h.Flags&FlagLastPDU == 0 {
		return bad(FESInvalidHeaderField, OffFlags, "SUCCESS without LAST_PDU")
	}
	switch {
	case h.Type == TypeH2CTermReq || h.Type == TypeC2HTermReq:
		if h.PLen < TermReqHdrLen || h.PLen > TermReqHdrLen+TermReqMaxData {
			return bad(FESInvalidHeaderField, OffPLen, "plen %d out of [24,152]", h.PLen)
		}
		return nil
	case rule.hlen == ICLen:
		if h.PLen != ICLen {
			return bad(FESInvalidHeaderField, OffPLen, "plen %d, want 128", h.PLen)
		}
		if h.PDO != 0 {
			return bad(FESInvalidHeaderField, OffPDO, "pdo %d, want 0", h.PDO)
		}
		return nil
	}
	return h.validateData(rule, dg, maxData, bad)
}

func (h Header) validateData(rule typeRule, dg Digests, maxData int,
	bad func(uint16, uint32, string, ...any) *FatalError) *FatalError {
	hdrEnd := uint32(h.HLen) + uint32(h.HDigestLen())
	hasD := h.Flags&FlagDDGST != 0
	if h.PLen < hdrEnd {
		return bad(FESInvalidHeaderField, OffPLen, "plen %d below header end %d", h.PLen, hdrEnd)
	}
	if h.PLen == hdrEnd && (h.PDO == 0 || uint32(h.PDO) == hdrEnd) {
		if rule.data == 2 {
			return bad(FESInvalidHeaderField, OffPLen, "plen %d leaves no data", h.PLen)
		}
		if hasD {
			return bad(FESInvalidHeaderField, OffFlags, "DDGSTF on a pdu without data")
		}
		return nil
	}
	if rule.data == 0 {
		if h.PDO != 0 {
			return bad(FESInvalidHeaderField, OffPDO, "pdo %d on a pdu without data", h.PDO)
		}
		return bad(FESInvalidHeaderField, OffPLen, "plen %d, want %d", h.PLen, hdrEnd)
	}
	if uint32(h.PDO) < hdrEnd {
		return bad(FESInvalidHeaderField, OffPDO, "pdo %d below header end %d", h.PDO, hdrEnd)
	}
	if hasD != dg.Data {
		return bad(FESInvalidHeaderField, OffFlags, "DDGSTF=%t but data digest negotiated=%t", hasD, dg.Data)
	}
	dd := uint32(0)
	if hasD {
		dd = DigestLen
	}
	if h.PLen <= uint32(h.PDO)+dd {
		return bad(FESInvalidHeaderField, OffPLen, "plen %d leaves no data after pdo %d", h.PLen, h.PDO)
	}
	if n := h.PLen - uint32(h.PDO) - dd; maxData >= 0 && uint64(n) > uint64(maxData) {
		return bad(FESDataLimitExceeded, 0, "data length %d over the limit %d", n, maxData)
	}
	return nil
}

// ReadHeader reads one PDU header from r into hdr, which must hold at least
// MaxHeaderLen bytes, validates it (see Header.Validate) and checks the
// header digest when present. Afterwards hdr[:h.HLen] holds the PDU header;
// the data part (h.DataLen() bytes, after h.PadLen() bytes of padding) is
// still unread: read it with ReadData.
//
// Errors: io.EOF when r ends before the first byte, io.ErrUnexpectedEOF (or
// r's error) when it ends inside the header, *FatalError for a bad PDU.
// maxData < 0 means no limit on the data length.
func ReadHeader(r io.Reader, hdr []byte, dg Digests, maxData int) (Header, error) {
	if len(hdr) < MaxHeaderLen {
		return Header{}, fmt.Errorf("pdu: header buffer of %d bytes, need %d", len(hdr), MaxHeaderLen)
	}
	if _, err := io.ReadFull(r, hdr[:CommonHeaderLen]); err != nil {
		return Header{}, err
	}
	h := ParseHeader(hdr)
	if fe := h.validate(dg, maxData); fe != nil {
		return h, fe
	}
	end := int(h.HLen) + h.HDigestLen()
	if _, err := io.ReadFull(r, hdr[CommonHeaderLen:end]); err != nil {
		return h, noEOF(err)
	}
	if h.HDigestLen() != 0 {
		got := binary.LittleEndian.Uint32(hdr[h.HLen:end])
		if want := crc32c(hdr[:h.HLen]); got != want {
			return h, NewFatalError(FESHeaderDigest, got, hdr[:h.HLen],
				"%s: header digest 0x%08x, computed 0x%08x", h.Type, got, want)
		}
	}
	return h, nil
}

// ReadData reads the data part of the PDU whose header ReadHeader returned:
// it skips the padding, reads exactly h.DataLen() bytes into dst (which must
// have that length) and checks the data digest when present. A digest
// mismatch returns a *DataDigestError after consuming the whole PDU.
func ReadData(r io.Reader, h Header, dst []byte) error {
	if len(dst) != h.DataLen() {
		return fmt.Errorf("pdu: ReadData with %d bytes for %d bytes of data", len(dst), h.DataLen())
	}
	if err := skip(r, h.PadLen()); err != nil {
		return err
	}
	if _, err := io.ReadFull(r, dst); err != nil {
		return noEOF(err)
	}
	if h.DDigestLen() == 0 {
		return nil
	}
	var d [DigestLen]byte
	if _, err := io.ReadFull(r, d[:]); err != nil {
		return noEOF(err)
	}
	got, want := binary.LittleEndian.Uint32(d[:]), crc32c(dst)
	if got != want {
		return &DataDigestError{Got: got, Want: want}
	}
	return nil
}

// Discard reads and drops the data part of a PDU (padding, data, digest).
func Discard(r io.Reader, h Header) error {
	return skip(r, h.PadLen()+h.DataLen()+h.DDigestLen())
}

func skip(r io.Reader, n int) error {
	if n <= 0 {
		return nil // the scratch buffer escapes to the heap: no padding, no allocation
	}
	var scratch [256]byte
	for n > 0 {
		k := min(n, len(scratch))
		if _, err := io.ReadFull(r, scratch[:k]); err != nil {
			return noEOF(err)
		}
		n -= k
	}
	return nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// PDU is one whole PDU read by ReadPDU. Hdr and Data alias the buffer given
// to ReadPDU.
type PDU struct {
	Header Header
	Hdr    []byte // the hlen header bytes, common header included
	Data   []byte // the data bytes (TermReq: the copied header); nil if none
}

// ReadPDU reads one whole PDU from r: header into buf, data after it. buf is
// grown (reallocated) when it is too small; the returned PDU aliases the
// buffer used, which is returned too so that callers can keep it. maxData
// bounds the data length (<0: no limit); errors are those of ReadHeader and
// ReadData.
func ReadPDU(r io.Reader, buf []byte, maxData int, dg Digests) (PDU, []byte, error) {
	if cap(buf) < MaxHeaderLen {
		buf = make([]byte, MaxHeaderLen+4096)
	}
	buf = buf[:cap(buf)]
	h, err := ReadHeader(r, buf, dg, maxData)
	if err != nil {
		return PDU{Header: h}, buf, err
	}
	p := PDU{Header: h, Hdr: buf[:h.HLen]}
	n := h.DataLen()
	if n == 0 {
		return p, buf, nil
	}
	start := int(h.HLen)
	if need := start + n; need > len(buf) {
		nb := make([]byte, need)
		copy(nb, buf[:start])
		buf = nb
		p.Hdr = buf[:h.HLen]
	}
	p.Data = buf[start : start+n]
	return p, buf, ReadData(r, h, p.Data)
}
