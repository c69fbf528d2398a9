package proto

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// FuzzParseRequest checks that any 28+ bytes either parse into a request that
// re-encodes to the same bytes or fail with ErrBadMagic / ErrShort, and that
// CheckFlags never panics. The seed corpus is in testdata/fuzz.
func FuzzParseRequest(f *testing.F) {
	f.Add(AppendRequest(nil, Request{Type: CmdRead, Cookie: 1, Offset: 4096, Length: 4096}))
	f.Add(AppendRequest(nil, Request{Flags: CmdFlagFUA, Type: CmdWrite, Cookie: 2, Length: 512}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			if !errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrShort) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if got := AppendRequest(nil, r); !bytes.Equal(got, b[:RequestSize]) {
			t.Fatalf("re-encoded %x, want %x", got, b[:RequestSize])
		}
		for _, tf := range []TransmissionFlags{0, 0xffff, FlagHasFlags | FlagSendFUA} {
			_ = CheckFlags(r, tf)
		}
	})
}

// FuzzOptions feeds a byte stream to the handshake parsers the server runs
// on client input: ReadOption in a loop, then the option's data parser.
// Nothing may panic, and what parses must re-encode to the same bytes.
func FuzzOptions(f *testing.F) {
	f.Add(AppendOption(nil, OptGo, AppendInfoRequest(nil, InfoRequest{Name: "x", Infos: []InfoType{InfoBlockSize}})))
	f.Add(AppendOption(nil, OptSetMetaContext, AppendMetaContextRequest(nil, MetaContextRequest{Queries: []string{MetaContextBaseAllocation}})))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for range 64 {
			h, data, err := ReadOption(r, 1<<16)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) &&
					!errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrTooLong) {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			checkOptionData(t, h.Code, data)
		}
	})
}

func checkOptionData(t *testing.T, code Option, data []byte) {
	switch code {
	case OptInfo, OptGo:
		req, err := ParseInfoRequest(data)
		if err == nil && !bytes.Equal(AppendInfoRequest(nil, req), data) {
			t.Fatalf("info request %+v does not re-encode to %x", req, data)
		}
	case OptListMetaContext, OptSetMetaContext:
		req, err := ParseMetaContextRequest(data)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendMetaContextRequest(nil, req), data) {
			t.Fatalf("meta context request %+v does not re-encode to %x", req, data)
		}
		again, err := ParseMetaContextRequest(AppendMetaContextRequest(nil, req))
		if err != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("meta context round trip: %+v, %v", again, err)
		}
	default:
		// Option replies share the string helpers: exercise the client-side
		// parsers on the same bytes.
		_, _ = ParseInfo(data)
		_, _, _ = ParseServer(data)
		_, _, _ = ParseMetaContext(data)
		_, _, _ = ParseBlockStatusPayload(data)
		_, _ = ParseErrorPayload(ChunkErrorOffset, data)
	}
}
