package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// replyPayloadMax bounds the payload a client takes from one chunk in
// FuzzReplies (a real client bounds it by the request's length).
const replyPayloadMax = 1 << 16

// FuzzReplies feeds a server's reply stream to the client-side parsers
// ("Transmission phase", simple and structured replies): a simple reply or
// a chunk header, then the chunk's payload by type. Nothing may panic; a
// bad reply fails with ErrShort, ErrBadMagic or ErrMalformed; and what
// parses re-encodes to the same bytes, so that nothing the parsers accept
// is silently read differently (trailing bytes, a length that does not add
// up). The seed corpus is in testdata/fuzz.
func FuzzReplies(f *testing.F) {
	f.Add(AppendSimpleReply(nil, 0, 1))
	stream := append(AppendOffsetDataHeader(nil, 2, false, 0, 3), "abc"...)
	stream = AppendOffsetHole(stream, 2, false, 3, 4096)
	f.Add(AppendNone(stream, 2))
	f.Add(AppendOffsetHole(nil, 3, true, 4096, 512))
	f.Add(AppendBlockStatus(nil, 4, true, 1, []BlockDescriptor{{Length: 4096, Status: StateHole | StateZero}, {Length: 512}}))
	f.Add(AppendError(nil, 5, 5, "EIO"))
	f.Add(AppendErrorOffset(nil, 6, true, 28, "ENOSPC", 8192))
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) >= 4 {
			var n int
			switch binary.BigEndian.Uint32(b) {
			case MagicSimpleReply:
				n = checkSimpleReply(t, b)
			case MagicStructuredReply:
				n = checkChunk(t, b)
			default:
				_, err := ParseChunkHeader(b)
				wantClass(t, err, ErrShort, ErrBadMagic)
				return
			}
			if n == 0 {
				return
			}
			b = b[n:]
		}
	})
}

// checkSimpleReply parses the simple reply at the start of b and returns
// its length, or 0 when b is too short.
func checkSimpleReply(t *testing.T, b []byte) int {
	errno, cookie, err := ParseSimpleReply(b)
	if err != nil {
		wantClass(t, err, ErrShort)
		return 0
	}
	if got := AppendSimpleReply(nil, errno, cookie); !bytes.Equal(got, b[:SimpleReplySize]) {
		t.Fatalf("simple reply re-encoded %x, want %x", got, b[:SimpleReplySize])
	}
	return SimpleReplySize
}

// checkChunk parses the chunk at the start of b and returns its length, or
// 0 when b holds no whole chunk (or one longer than a client takes).
func checkChunk(t *testing.T, b []byte) int {
	h, err := ParseChunkHeader(b)
	if err != nil {
		wantClass(t, err, ErrShort)
		return 0
	}
	if got := AppendChunkHeader(nil, h); !bytes.Equal(got, b[:ChunkHeaderSize]) {
		t.Fatalf("chunk header %+v re-encoded %x, want %x", h, got, b[:ChunkHeaderSize])
	}
	if h.Length > replyPayloadMax || int(h.Length) > len(b)-ChunkHeaderSize {
		return 0
	}
	whole := b[:ChunkHeaderSize+int(h.Length)]
	if again := encodeChunk(t, h, whole[ChunkHeaderSize:]); again != nil && !bytes.Equal(again, whole) {
		t.Fatalf("chunk %+v re-encoded %x, want %x", h, again, whole)
	}
	return len(whole)
}

// encodeChunk parses the payload p of a chunk with header h and encodes
// what it parsed again, or returns nil when the payload is malformed or
// the chunk's type or flags have no encoder to compare with.
func encodeChunk(t *testing.T, h ChunkHeader, p []byte) []byte {
	if h.Flags&^ReplyFlagDone != 0 {
		return nil
	}
	last := h.Flags&ReplyFlagDone != 0
	switch h.Type {
	case ChunkOffsetData, ChunkOffsetHole:
		off, data, hole, err := ParseOffsetPayload(h.Type, p)
		if err != nil {
			wantClass(t, err, ErrMalformed)
			return nil
		}
		if h.Type == ChunkOffsetHole {
			return AppendOffsetHole(nil, h.Cookie, last, off, hole)
		}
		return append(AppendOffsetDataHeader(nil, h.Cookie, last, off, len(data)), data...)
	case ChunkBlockStatus:
		id, d, err := ParseBlockStatusPayload(p)
		if err != nil {
			wantClass(t, err, ErrMalformed)
			return nil
		}
		return AppendBlockStatus(nil, h.Cookie, last, id, d)
	case ChunkError, ChunkErrorOffset:
		return encodeError(t, h, p)
	}
	return nil
}

// encodeError parses and re-encodes an error chunk's payload.
func encodeError(t *testing.T, h ChunkHeader, p []byte) []byte {
	e, err := ParseErrorPayload(h.Type, p)
	if err != nil {
		wantClass(t, err, ErrMalformed)
		return nil
	}
	if e.Errno == 0 {
		t.Fatalf("error chunk %x parsed with errno 0", p)
	}
	if len(e.Message) > MaxString {
		return nil // the encoders clip messages
	}
	if h.Type == ChunkError {
		if h.Flags&ReplyFlagDone == 0 {
			return nil // AppendError always sets DONE
		}
		return AppendError(nil, h.Cookie, e.Errno, e.Message)
	}
	return AppendErrorOffset(nil, h.Cookie, h.Flags&ReplyFlagDone != 0, e.Errno, e.Message, e.Offset)
}

func wantClass(t *testing.T, err error, classes ...error) {
	t.Helper()
	for _, c := range classes {
		if errors.Is(err, c) {
			return
		}
	}
	t.Fatalf("error %v is none of %v", err, classes)
}
