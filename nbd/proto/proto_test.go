package proto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Spec "Newstyle negotiation": NBDMAGIC, IHAVEOPT, 16 bits of flags.
func TestGreeting(t *testing.T) {
	got := AppendGreeting(nil, FlagFixedNewstyle|FlagNoZeroes)
	want := mustHex(t, "4e42444d41474943 49484156454f5054 0003")
	if !bytes.Equal(got, want) {
		t.Fatalf("greeting %x, want %x", got, want)
	}
	f, err := ParseGreeting(got)
	if err != nil || f != FlagFixedNewstyle|FlagNoZeroes {
		t.Fatalf("ParseGreeting = %v, %v", f, err)
	}
	oldstyle := mustHex(t, "4e42444d41474943 0000420281861253 0000")
	if _, err := ParseGreeting(oldstyle); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("oldstyle greeting: %v, want ErrBadMagic", err)
	}
}

// Spec "Client flags": the server must drop a client that sets an unknown
// flag or one the server did not offer.
func TestClientFlags(t *testing.T) {
	both := FlagFixedNewstyle | FlagNoZeroes
	for _, tc := range []struct {
		name    string
		flags   uint32
		offered HandshakeFlags
		ok      bool
	}{
		{"none", 0, both, true},
		{"fixed", 1, both, true},
		{"fixed+nozeroes", 3, both, true},
		{"nozeroes not offered", 3, FlagFixedNewstyle, false},
		{"unknown bit 2", 5, both, false},
		{"high bit", 1 << 31, both, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseClientFlags(AppendClientFlags(nil, ClientFlags(tc.flags)), tc.offered)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrUnknownFlags)) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if _, err := ParseClientFlags([]byte{0, 0}, both); !errors.Is(err, ErrShort) {
		t.Fatalf("short flags: %v", err)
	}
}

// Spec "Fixed newstyle negotiation": option header and option reply layout.
func TestOptionHeader(t *testing.T) {
	b := AppendOption(nil, OptGo, []byte{1, 2, 3})
	want := mustHex(t, "49484156454f5054 00000007 00000003 010203")
	if !bytes.Equal(b, want) {
		t.Fatalf("option %x, want %x", b, want)
	}
	h, data, err := ReadOption(bytes.NewReader(b), 16)
	if err != nil || h.Code != OptGo || h.Length != 3 || !bytes.Equal(data, []byte{1, 2, 3}) {
		t.Fatalf("ReadOption = %+v %x %v", h, data, err)
	}
	if _, _, err := ReadOption(bytes.NewReader(b), 2); !errors.Is(err, ErrTooLong) {
		t.Fatalf("over-long option: %v", err)
	}
	bad := append([]byte(nil), b...)
	bad[0] ^= 0xff
	if _, _, err := ReadOption(bytes.NewReader(bad), 16); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("bad option magic: %v", err)
	}
	if _, _, err := ReadOption(bytes.NewReader(b[:10]), 16); err == nil {
		t.Fatal("truncated option header accepted")
	}
	if _, _, err := ReadOption(bytes.NewReader(b[:17]), 16); err == nil {
		t.Fatal("truncated option data accepted")
	}
}

// Spec "Option reply types" and the INFO extension's NBD_INFO_* layouts:
// EXPORT is 12 bytes, BLOCK_SIZE 14 (libnbd rejects other lengths).
func TestOptionReplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"ack", AppendAck(nil, OptStructuredReply),
			"0003e889045565a9 00000008 00000001 00000000"},
		{"err unsup", AppendOptionError(nil, 99, RepErrUnsup, "no"),
			"0003e889045565a9 00000063 80000001 00000002 6e6f"},
		{"server", AppendServer(nil, "vol", "d"),
			"0003e889045565a9 00000003 00000002 00000008 00000003 766f6c 64"},
		{"meta context", AppendMetaContext(nil, OptSetMetaContext, 1, "base:allocation"),
			"0003e889045565a9 0000000a 00000004 00000013 00000001 626173653a616c6c6f636174696f6e"},
		{"info export", AppendInfoExport(nil, OptGo, 1<<30, FlagHasFlags|FlagSendFlush),
			"0003e889045565a9 00000007 00000003 0000000c 0000 0000000040000000 0005"},
		{"info name", AppendInfoName(nil, OptInfo, "v"),
			"0003e889045565a9 00000006 00000003 00000003 0001 76"},
		{"info description", AppendInfoDescription(nil, OptGo, "dd"),
			"0003e889045565a9 00000007 00000003 00000004 0002 6464"},
		{"info block size", AppendInfoBlockSize(nil, OptGo, BlockSize{512, 4096, 32 << 20}),
			"0003e889045565a9 00000007 00000003 0000000e 0003 00000200 00001000 02000000"},
		{"export name nozeroes", AppendExportNameReply(nil, 4096, FlagHasFlags, true),
			"0000000000001000 0001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := mustHex(t, tc.want); !bytes.Equal(tc.got, want) {
				t.Fatalf("got  %x\nwant %x", tc.got, want)
			}
			if tc.name == "export name nozeroes" {
				return
			}
			h, err := ParseOptionReplyHeader(tc.got)
			if err != nil || int(h.Length) != len(tc.got)-OptionReplyHeaderSize {
				t.Fatalf("ParseOptionReplyHeader = %+v, %v", h, err)
			}
		})
	}
	if n := len(AppendExportNameReply(nil, 0, FlagHasFlags, false)); n != 134 {
		t.Fatalf("EXPORT_NAME reply with zeroes is %d bytes, want 134", n)
	}
}

func TestParseInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want Info
		ok   bool
	}{
		{"export", AppendInfoExport(nil, OptGo, 77, 3), Info{Type: InfoExport, Size: 77, Flags: 3}, true},
		{"name", AppendInfoName(nil, OptGo, "x"), Info{Type: InfoName, Name: "x"}, true},
		{"desc", AppendInfoDescription(nil, OptGo, "y"), Info{Type: InfoDescription, Description: "y"}, true},
		{"block size", AppendInfoBlockSize(nil, OptGo, BlockSize{1, 2, 3}), Info{Type: InfoBlockSize, BlockSize: BlockSize{1, 2, 3}}, true},
		{"short export", AppendOptionReply(nil, OptGo, RepInfo, []byte{0, 0, 1}), Info{}, false},
		{"empty", AppendOptionReply(nil, OptGo, RepInfo, nil), Info{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseInfo(tc.b[OptionReplyHeaderSize:])
			if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
				t.Fatalf("ParseInfo = %+v, %v; want %+v ok=%v", got, err, tc.want, tc.ok)
			}
		})
	}
}

// Spec "Block size constraints".
func TestBlockSizeValidate(t *testing.T) {
	for _, tc := range []struct {
		s  BlockSize
		ok bool
	}{
		{BlockSize{512, 4096, 32 << 20}, true},
		{BlockSize{1, 512, 0xFFFFFFFF}, true},
		{BlockSize{4096, 4096, 4096}, true},
		{BlockSize{64 << 10, 64 << 10, 1 << 20}, true},
		{BlockSize{0, 4096, 1 << 20}, false},              // min not a power of two
		{BlockSize{3, 4096, 1 << 20}, false},              // min not a power of two
		{BlockSize{128 << 10, 128 << 10, 1 << 20}, false}, // min over 64 KiB
		{BlockSize{512, 256, 1 << 20}, false},             // preferred under 512
		{BlockSize{4096, 2048, 1 << 20}, false},           // preferred under min
		{BlockSize{512, 4096, 2048}, false},               // max under preferred
		{BlockSize{4096, 4096, 4096*3 + 512}, false},      // max not a multiple of min
	} {
		if err := tc.s.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: err = %v, want ok=%v", tc.s, err, tc.ok)
		}
	}
}

// Spec "NBD_OPT_INFO and NBD_OPT_GO" request data.
func TestInfoRequest(t *testing.T) {
	r := InfoRequest{Name: "vol", Infos: []InfoType{InfoBlockSize, InfoName}}
	b := AppendInfoRequest(nil, r)
	if want := mustHex(t, "00000003 766f6c 0002 0003 0001"); !bytes.Equal(b, want) {
		t.Fatalf("got %x want %x", b, want)
	}
	got, err := ParseInfoRequest(b)
	if err != nil || got.Name != "vol" || len(got.Infos) != 2 || got.Infos[0] != InfoBlockSize {
		t.Fatalf("ParseInfoRequest = %+v, %v", got, err)
	}
	for name, bad := range map[string]string{
		"empty":          "",
		"name too long":  "00000010 766f6c 0000",
		"no count":       "00000003 766f6c",
		"count too big":  "00000000 0002 0003",
		"trailing bytes": "00000000 0001 0003 00",
		"NUL in name":    "00000001 00 0000",
	} {
		if _, err := ParseInfoRequest(mustHex(t, bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

// Spec "Metadata querying" and NBD_OPT_{LIST,SET}_META_CONTEXT data.
func TestMetaContextRequest(t *testing.T) {
	r := MetaContextRequest{Name: "", Queries: []string{"base:allocation", "qemu:"}}
	b := AppendMetaContextRequest(nil, r)
	got, err := ParseMetaContextRequest(b)
	if err != nil || got.Name != "" || len(got.Queries) != 2 || got.Queries[1] != "qemu:" {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	for name, bad := range map[string]string{
		"no count":        "00000000",
		"huge count":      "00000000 ffffffff",
		"query past end":  "00000000 00000001 00000009 6161",
		"trailing":        "00000000 00000000 00",
		"missing queries": "00000000 00000002 00000000",
	} {
		if _, err := ParseMetaContextRequest(mustHex(t, bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

// Spec "Request message": 28 bytes, magic 0x25609513.
func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		hex  string
		want Request
		err  error
	}{
		{"read", "25609513 0000 0000 0102030405060708 0000000000001000 00010000",
			Request{Type: CmdRead, Cookie: 0x0102030405060708, Offset: 4096, Length: 65536}, nil},
		{"write fua", "25609513 0001 0001 0000000000000001 0000000000000200 00000200",
			Request{Flags: CmdFlagFUA, Type: CmdWrite, Cookie: 1, Offset: 512, Length: 512}, nil},
		{"disc", "25609513 0000 0002 0000000000000009 0000000000000000 00000000",
			Request{Type: CmdDisc, Cookie: 9}, nil},
		{"zeroes no-hole fast", "25609513 0012 0006 0000000000000002 0000000000000000 ffffffff",
			Request{Flags: CmdFlagNoHole | CmdFlagFastZero, Type: CmdWriteZeroes, Cookie: 2, Length: 0xffffffff}, nil},
		{"kernel word", "25609513 0001 0001 ffffffff00000001 0000000000000000 00001000",
			Request{Flags: CmdFlagFUA, Type: CmdWrite, Cookie: 0xffffffff00000001, Length: 4096}, nil},
		{"bad magic", "25609514 0000 0000 0000000000000000 0000000000000000 00000000", Request{}, ErrBadMagic},
		{"reply magic", "67446698 0000 0000 0000000000000000 0000000000000000 00000000", Request{}, ErrBadMagic},
		{"extended magic", "21e41c71 0000 0000 0000000000000000 0000000000000000 00000000", Request{}, ErrBadMagic},
		{"short", "25609513 0000 0000", Request{}, ErrShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustHex(t, tc.hex)
			got, err := ParseRequest(b)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if tc.err == nil && !bytes.Equal(AppendRequest(nil, got), b) {
				t.Fatalf("re-encoded %x, want %x", AppendRequest(nil, got), b)
			}
		})
	}
}

// Spec "Command flags": which flags are valid on which command.
func TestCheckFlags(t *testing.T) {
	all := FlagHasFlags | FlagSendFUA | FlagSendDF | FlagSendFastZero | FlagSendWriteZeroes
	for _, tc := range []struct {
		cmd   Cmd
		flags CmdFlags
		tf    TransmissionFlags
		ok    bool
	}{
		{CmdRead, 0, FlagHasFlags, true},
		{CmdRead, CmdFlagFUA, all, true}, // FUA is valid on any command
		{CmdRead, CmdFlagFUA, FlagHasFlags, false},
		{CmdRead, CmdFlagDF, all, true},
		{CmdRead, CmdFlagDF, FlagHasFlags, false},
		{CmdWrite, CmdFlagDF, all, false},
		{CmdWrite, CmdFlagNoHole, all, false},
		{CmdWriteZeroes, CmdFlagNoHole, FlagHasFlags, true},
		{CmdWriteZeroes, CmdFlagFastZero, all, true},
		{CmdWriteZeroes, CmdFlagFastZero, FlagHasFlags, false},
		{CmdBlockStatus, CmdFlagReqOne, FlagHasFlags, true},
		{CmdTrim, CmdFlagReqOne, all, false},
		{CmdWrite, CmdFlagPayloadLen, all, false},
		{CmdFlush, 1 << 15, all, false},
	} {
		err := CheckFlags(Request{Type: tc.cmd, Flags: tc.flags}, tc.tf)
		if (err == nil) != tc.ok {
			t.Errorf("%v flags %#x tf %#x: err = %v, want ok=%v", tc.cmd, tc.flags, tc.tf, err, tc.ok)
		}
	}
}

// Spec "Simple reply message" and "Structured reply chunk message".
func TestReplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"simple ok", AppendSimpleReply(nil, 0, 7), "67446698 00000000 0000000000000007"},
		{"simple EINVAL", AppendSimpleReply(nil, EINVAL, 7), "67446698 00000016 0000000000000007"},
		{"none", AppendNone(nil, 5), "668e33ef 0001 0000 0000000000000005 00000000"},
		{"offset data", AppendOffsetDataHeader(nil, 5, true, 4096, 512),
			"668e33ef 0001 0001 0000000000000005 00000208 0000000000001000"},
		{"offset hole", AppendOffsetHole(nil, 5, false, 8192, 1<<20),
			"668e33ef 0000 0002 0000000000000005 0000000c 0000000000002000 00100000"},
		{"block status", AppendBlockStatus(nil, 5, true, 1, []BlockDescriptor{{4096, 0}, {8192, 3}}),
			"668e33ef 0001 0005 0000000000000005 00000014 00000001 00001000 00000000 00002000 00000003"},
		{"error", AppendError(nil, 5, EIO, "x"),
			"668e33ef 0001 8001 0000000000000005 00000007 00000005 0001 78"},
		{"error offset", AppendErrorOffset(nil, 5, true, ENOSPC, "", 4096),
			"668e33ef 0001 8002 0000000000000005 0000000e 0000001c 0000 0000000000001000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := mustHex(t, tc.want); !bytes.Equal(tc.got, want) {
				t.Fatalf("got  %x\nwant %x", tc.got, want)
			}
		})
	}
}

func TestParseChunks(t *testing.T) {
	b := AppendError(nil, 3, ENOTSUP, "slow")
	h, err := ParseChunkHeader(b)
	if err != nil || h.Type != ChunkError || !h.Type.IsError() || h.Flags != ReplyFlagDone {
		t.Fatalf("header %+v, %v", h, err)
	}
	e, err := ParseErrorPayload(h.Type, b[ChunkHeaderSize:])
	if err != nil || e.Errno != ENOTSUP || e.Message != "slow" {
		t.Fatalf("error payload %+v, %v", e, err)
	}
	b = AppendErrorOffset(nil, 3, true, EIO, "m", 99)
	if e, err := ParseErrorPayload(ChunkErrorOffset, b[ChunkHeaderSize:]); err != nil || e.Offset != 99 {
		t.Fatalf("error offset payload %+v, %v", e, err)
	}
	if _, err := ParseErrorPayload(ChunkError, []byte{0, 0, 0, 0, 0, 0}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("errno 0 accepted: %v", err)
	}
	b = AppendBlockStatus(nil, 1, true, 7, []BlockDescriptor{{1, 2}})
	id, d, err := ParseBlockStatusPayload(b[ChunkHeaderSize:])
	if err != nil || id != 7 || len(d) != 1 || d[0] != (BlockDescriptor{1, 2}) {
		t.Fatalf("block status %d %v %v", id, d, err)
	}
	if _, _, err := ParseBlockStatusPayload(mustHex(t, "00000001 00000000 00000000")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("zero-length extent accepted: %v", err)
	}
	b = AppendOffsetHole(nil, 1, true, 5, 6)
	if off, _, n, err := ParseOffsetPayload(ChunkOffsetHole, b[ChunkHeaderSize:]); err != nil || off != 5 || n != 6 {
		t.Fatalf("hole %d %d %v", off, n, err)
	}
	if _, _, _, err := ParseOffsetPayload(ChunkOffsetData, make([]byte, 8)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty data chunk accepted: %v", err)
	}
	if _, err := ParseChunkHeader(AppendSimpleReply(nil, 0, 0)); err == nil {
		t.Fatal("simple reply parsed as a chunk")
	}
}

func TestMessagesClipped(t *testing.T) {
	long := strings.Repeat("x", 3*MaxString)
	b := AppendError(nil, 1, EIO, long)
	e, err := ParseErrorPayload(ChunkError, b[ChunkHeaderSize:])
	if err != nil || len(e.Message) != MaxString {
		t.Fatalf("message of %d bytes, %v", len(e.Message), err)
	}
}

func TestStrings(t *testing.T) {
	for got, want := range map[string]string{
		CmdBlockStatus.String(): "NBD_CMD_BLOCK_STATUS", Cmd(77).String(): "NBD_CMD_77",
		OptGo.String(): "NBD_OPT_GO", Option(99).String(): "NBD_OPT_99",
		ENOSPC.String(): "ENOSPC", Errno(0).String(): "OK", Errno(4).String(): "errno 4",
	} {
		if got != want {
			t.Errorf("got %q want %q", got, want)
		}
	}
	if !RepErrUnsup.IsError() || RepAck.IsError() {
		t.Error("ReplyType.IsError")
	}
}
