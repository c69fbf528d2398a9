package proto

import (
	"encoding/binary"
	"fmt"
)

// Request is a compact transmission request ("Request message").
type Request struct {
	Flags  CmdFlags
	Type   Cmd
	Cookie uint64 // the "handle": opaque, echoed in every reply chunk
	Offset uint64
	Length uint32
}

// ParseRequest parses the 28-byte request header at the start of b. A wrong
// magic is ErrBadMagic: the server cannot find the next request and must drop
// the connection. The WRITE payload that follows is not part of the header.
func ParseRequest(b []byte) (Request, error) {
	if len(b) < RequestSize {
		return Request{}, fmt.Errorf("request of %d bytes: %w", len(b), ErrShort)
	}
	if m := binary.BigEndian.Uint32(b); m != MagicRequest {
		if m == MagicExtendedRequest {
			return Request{}, fmt.Errorf("extended request header %#x without NBD_OPT_EXTENDED_HEADERS: %w", m, ErrBadMagic)
		}
		return Request{}, fmt.Errorf("request magic %#x: %w", m, ErrBadMagic)
	}
	return Request{
		Flags:  CmdFlags(binary.BigEndian.Uint16(b[4:])),
		Type:   Cmd(binary.BigEndian.Uint16(b[6:])),
		Cookie: binary.BigEndian.Uint64(b[8:]),
		Offset: binary.BigEndian.Uint64(b[16:]),
		Length: binary.BigEndian.Uint32(b[24:]),
	}, nil
}

// AppendRequest appends the 28-byte header of r (the client side).
func AppendRequest(b []byte, r Request) []byte {
	b = binary.BigEndian.AppendUint32(b, MagicRequest)
	b = binary.BigEndian.AppendUint16(b, uint16(r.Flags))
	b = binary.BigEndian.AppendUint16(b, uint16(r.Type))
	b = binary.BigEndian.AppendUint64(b, r.Cookie)
	b = binary.BigEndian.AppendUint64(b, r.Offset)
	return binary.BigEndian.AppendUint32(b, r.Length)
}

// CheckFlags reports whether r's command flags are valid for its command
// given the export's transmission flags, as "Command flags" defines them:
// FUA on any command when SEND_FUA was advertised; NO_HOLE and FAST_ZERO on
// WRITE_ZEROES (FAST_ZERO only with SEND_FAST_ZERO); DF on READ with
// SEND_DF; REQ_ONE on BLOCK_STATUS. Anything else (PAYLOAD_LEN included,
// since extended headers are not negotiated) is invalid: the server answers
// EINVAL.
func CheckFlags(r Request, tf TransmissionFlags) error {
	allowed := CmdFlags(0)
	if tf&FlagSendFUA != 0 {
		allowed |= CmdFlagFUA
	}
	switch r.Type {
	case CmdWriteZeroes:
		allowed |= CmdFlagNoHole
		if tf&FlagSendFastZero != 0 {
			allowed |= CmdFlagFastZero
		}
	case CmdRead:
		if tf&FlagSendDF != 0 {
			allowed |= CmdFlagDF
		}
	case CmdBlockStatus:
		allowed |= CmdFlagReqOne
	}
	if bad := r.Flags &^ allowed; bad != 0 {
		return fmt.Errorf("%v with flags %#x not valid for it: %w", r.Type, uint16(bad), ErrMalformed)
	}
	return nil
}

// AppendSimpleReply appends a 16-byte simple reply ("Simple reply
// message"). The data of a successful READ follows it.
func AppendSimpleReply(b []byte, errno Errno, cookie uint64) []byte {
	b = binary.BigEndian.AppendUint32(b, MagicSimpleReply)
	b = binary.BigEndian.AppendUint32(b, uint32(errno))
	return binary.BigEndian.AppendUint64(b, cookie)
}

// ParseSimpleReply parses a simple reply (the client side).
func ParseSimpleReply(b []byte) (Errno, uint64, error) {
	if len(b) < SimpleReplySize {
		return 0, 0, fmt.Errorf("simple reply of %d bytes: %w", len(b), ErrShort)
	}
	if m := binary.BigEndian.Uint32(b); m != MagicSimpleReply {
		return 0, 0, fmt.Errorf("simple reply magic %#x: %w", m, ErrBadMagic)
	}
	return Errno(binary.BigEndian.Uint32(b[4:])), binary.BigEndian.Uint64(b[8:]), nil
}

// ChunkHeader is the fixed part of a structured reply chunk ("Structured
// reply chunk message").
type ChunkHeader struct {
	Flags  uint16 // ReplyFlagDone
	Type   ChunkType
	Cookie uint64
	Length uint32 // of the payload that follows
}

// AppendChunkHeader appends the 20-byte header h.
func AppendChunkHeader(b []byte, h ChunkHeader) []byte {
	b = binary.BigEndian.AppendUint32(b, MagicStructuredReply)
	b = binary.BigEndian.AppendUint16(b, h.Flags)
	b = binary.BigEndian.AppendUint16(b, uint16(h.Type))
	b = binary.BigEndian.AppendUint64(b, h.Cookie)
	return binary.BigEndian.AppendUint32(b, h.Length)
}

// ParseChunkHeader parses a structured reply chunk header (the client side).
func ParseChunkHeader(b []byte) (ChunkHeader, error) {
	if len(b) < ChunkHeaderSize {
		return ChunkHeader{}, fmt.Errorf("chunk header of %d bytes: %w", len(b), ErrShort)
	}
	if m := binary.BigEndian.Uint32(b); m != MagicStructuredReply {
		return ChunkHeader{}, fmt.Errorf("chunk magic %#x: %w", m, ErrBadMagic)
	}
	return ChunkHeader{
		Flags:  binary.BigEndian.Uint16(b[4:]),
		Type:   ChunkType(binary.BigEndian.Uint16(b[6:])),
		Cookie: binary.BigEndian.Uint64(b[8:]),
		Length: binary.BigEndian.Uint32(b[16:]),
	}, nil
}

// done returns ReplyFlagDone when last is true.
func done(last bool) uint16 {
	if last {
		return ReplyFlagDone
	}
	return 0
}

// AppendNone appends the NBD_REPLY_TYPE_NONE chunk, which always carries
// DONE: the success answer to any command.
func AppendNone(b []byte, cookie uint64) []byte {
	return AppendChunkHeader(b, ChunkHeader{Flags: ReplyFlagDone, Type: ChunkNone, Cookie: cookie})
}

// AppendOffsetDataHeader appends the header and offset of an
// NBD_REPLY_TYPE_OFFSET_DATA chunk of n data bytes (n >= 1); the caller sends
// the n bytes right after it (so they need not be copied).
func AppendOffsetDataHeader(b []byte, cookie uint64, last bool, off uint64, n int) []byte {
	b = AppendChunkHeader(b, ChunkHeader{Flags: done(last), Type: ChunkOffsetData, Cookie: cookie, Length: uint32(8 + n)})
	return binary.BigEndian.AppendUint64(b, off)
}

// AppendOffsetHole appends an NBD_REPLY_TYPE_OFFSET_HOLE chunk: size bytes at
// off read as zeros (size > 0).
func AppendOffsetHole(b []byte, cookie uint64, last bool, off uint64, size uint32) []byte {
	b = AppendChunkHeader(b, ChunkHeader{Flags: done(last), Type: ChunkOffsetHole, Cookie: cookie, Length: 12})
	b = binary.BigEndian.AppendUint64(b, off)
	return binary.BigEndian.AppendUint32(b, size)
}

// BlockDescriptor is one extent of an NBD_REPLY_TYPE_BLOCK_STATUS chunk.
type BlockDescriptor struct {
	Length uint32 // nonzero
	Status uint32 // for base:allocation: StateHole | StateZero
}

// AppendBlockStatus appends an NBD_REPLY_TYPE_BLOCK_STATUS chunk for the
// metadata context id (at least one descriptor).
func AppendBlockStatus(b []byte, cookie uint64, last bool, id uint32, d []BlockDescriptor) []byte {
	b = AppendChunkHeader(b, ChunkHeader{Flags: done(last), Type: ChunkBlockStatus, Cookie: cookie, Length: uint32(4 + 8*len(d))})
	b = binary.BigEndian.AppendUint32(b, id)
	for _, e := range d {
		b = binary.BigEndian.AppendUint32(b, e.Length)
		b = binary.BigEndian.AppendUint32(b, e.Status)
	}
	return b
}

// AppendError appends an NBD_REPLY_TYPE_ERROR chunk (with DONE) carrying errno
// (nonzero) and a message cut to MaxString bytes.
func AppendError(b []byte, cookie uint64, errno Errno, msg string) []byte {
	msg = clip(msg)
	b = AppendChunkHeader(b, ChunkHeader{Flags: ReplyFlagDone, Type: ChunkError, Cookie: cookie, Length: uint32(6 + len(msg))})
	b = binary.BigEndian.AppendUint32(b, uint32(errno))
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

// AppendErrorOffset appends an NBD_REPLY_TYPE_ERROR_OFFSET chunk: errno at
// off, which must lie inside the request.
func AppendErrorOffset(b []byte, cookie uint64, last bool, errno Errno, msg string, off uint64) []byte {
	msg = clip(msg)
	b = AppendChunkHeader(b, ChunkHeader{Flags: done(last), Type: ChunkErrorOffset, Cookie: cookie, Length: uint32(14 + len(msg))})
	b = binary.BigEndian.AppendUint32(b, uint32(errno))
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	b = append(b, msg...)
	return binary.BigEndian.AppendUint64(b, off)
}

// ErrorPayload is the parsed payload of an error chunk.
type ErrorPayload struct {
	Errno   Errno
	Message string
	Offset  uint64 // ERROR_OFFSET only
}

// ParseErrorPayload parses the payload of an error chunk of type t: errno
// (4, nonzero), message length (2), message and, for ERROR_OFFSET, offset (8).
// Bytes left over after these are malformed.
func ParseErrorPayload(t ChunkType, p []byte) (ErrorPayload, error) {
	if len(p) < 6 {
		return ErrorPayload{}, fmt.Errorf("error chunk of %d bytes: %w", len(p), ErrMalformed)
	}
	e := ErrorPayload{Errno: Errno(binary.BigEndian.Uint32(p))}
	n := int(binary.BigEndian.Uint16(p[4:]))
	rest := p[6:]
	if e.Errno == 0 || n > len(rest) {
		return e, fmt.Errorf("error chunk errno %d message %d of %d bytes: %w", e.Errno, n, len(rest), ErrMalformed)
	}
	e.Message, rest = string(rest[:n]), rest[n:]
	if t != ChunkErrorOffset {
		if len(rest) != 0 {
			return e, fmt.Errorf("error chunk with %d bytes after the message: %w", len(rest), ErrMalformed)
		}
		return e, nil
	}
	if len(rest) != 8 {
		return e, fmt.Errorf("error offset chunk with %d bytes after the message: %w", len(rest), ErrMalformed)
	}
	e.Offset = binary.BigEndian.Uint64(rest)
	return e, nil
}

// ParseOffsetPayload parses the payload of an OFFSET_DATA chunk (offset and
// the data, which aliases p) or of an OFFSET_HOLE chunk (offset and size).
func ParseOffsetPayload(t ChunkType, p []byte) (off uint64, data []byte, holeSize uint32, err error) {
	switch {
	case t == ChunkOffsetData && len(p) >= 9:
		return binary.BigEndian.Uint64(p), p[8:], 0, nil
	case t == ChunkOffsetHole && len(p) == 12 && binary.BigEndian.Uint32(p[8:]) != 0:
		return binary.BigEndian.Uint64(p), nil, binary.BigEndian.Uint32(p[8:]), nil
	}
	return 0, nil, 0, fmt.Errorf("%d-byte payload for chunk type %d: %w", len(p), t, ErrMalformed)
}

// ParseBlockStatusPayload parses the payload of a BLOCK_STATUS chunk.
func ParseBlockStatusPayload(p []byte) (uint32, []BlockDescriptor, error) {
	if len(p) < 12 || (len(p)-4)%8 != 0 {
		return 0, nil, fmt.Errorf("block status chunk of %d bytes: %w", len(p), ErrMalformed)
	}
	d := make([]BlockDescriptor, (len(p)-4)/8)
	for i := range d {
		d[i] = BlockDescriptor{Length: binary.BigEndian.Uint32(p[4+8*i:]), Status: binary.BigEndian.Uint32(p[8+8*i:])}
		if d[i].Length == 0 {
			return 0, nil, fmt.Errorf("block status descriptor %d of length 0: %w", i, ErrMalformed)
		}
	}
	return binary.BigEndian.Uint32(p), d, nil
}
