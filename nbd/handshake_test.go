package nbd

import (
	"bytes"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

const fixedNoZeroes = proto.FlagCFixedNewstyle | proto.FlagCNoZeroes

// Spec "Client flags": an unknown client flag ends the session.
func TestHandshakeUnknownClientFlags(t *testing.T) {
	_, addr := serveMem(t, 1<<20, 512)
	rc := dialRaw(t, "tcp", addr, 1<<5)
	rc.expectClosed()
}

// Spec "Fixed newstyle negotiation": unknown options get NBD_REP_ERR_UNSUP
// and the negotiation goes on; so do STARTTLS and EXTENDED_HEADERS here.
func TestHandshakeUnsupportedOptions(t *testing.T) {
	_, addr := serveMem(t, 1<<20, 512)
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	for _, code := range []proto.Option{99, proto.OptPeekExport, proto.OptStartTLS, proto.OptExtendedHeaders, 0xFFFFFFFF} {
		r := rc.option(code, []byte("junk"))
		if len(r) != 1 || r[0].typ != proto.RepErrUnsup {
			t.Fatalf("%v: replies %+v, want one ERR_UNSUP", code, r)
		}
	}
	if size, _ := rc.goExport("mem", false); size != 1<<20 {
		t.Fatalf("size %d after unsupported options", size)
	}
}

// Spec "Option types", NBD_OPT_EXPORT_NAME: size, flags, 124 zero bytes
// unless NO_ZEROES; an unknown export ends the session.
func TestHandshakeExportName(t *testing.T) {
	m, addr := serveMem(t, 1<<20, 512)
	mustf(t, m.WriteAt(t.Context(), testutil.Pattern(512, 3), 512), "write")
	rc := dialRaw(t, "tcp", addr, proto.FlagCFixedNewstyle)
	rc.write(proto.AppendOption(nil, proto.OptExportName, []byte("mem")))
	b := rc.read(proto.ExportNameReplySize + 124)
	if !bytes.Equal(b[:8], []byte{0, 0, 0, 0, 0, 0x10, 0, 0}) || !bytes.Equal(b[10:], make([]byte, 124)) {
		t.Fatalf("EXPORT_NAME reply %x", b)
	}
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 1, Offset: 512, Length: 512}, nil)
	if errno, _, data := rc.simple(512); errno != 0 || !bytes.Equal(data, testutil.Pattern(512, 3)) {
		t.Fatalf("read after EXPORT_NAME: %v", errno)
	}

	rc = dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.write(proto.AppendOption(nil, proto.OptExportName, nil)) // default export
	if b := rc.read(proto.ExportNameReplySize); b[5] != 0x10 {
		t.Fatalf("default export reply %x", b)
	}

	rc = dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.write(proto.AppendOption(nil, proto.OptExportName, []byte("nope")))
	rc.expectClosed()
}

// Spec NBD_OPT_LIST: one SERVER reply per export, then ACK; data is invalid.
func TestHandshakeList(t *testing.T) {
	a, b := newMem(t, 1<<20, 512), newMem(t, 2<<20, 4096)
	_, addr := serve(t, Options{Exports: map[string]Export{"b": {Device: b}, "a": {Device: a, Description: "first"}}}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	r := rc.option(proto.OptList, nil)
	if len(r) != 3 || r[2].typ != proto.RepAck {
		t.Fatalf("LIST replies %+v", r)
	}
	for i, want := range [][2]string{{"a", "first"}, {"b", ""}} {
		name, desc, err := proto.ParseServer(r[i].data)
		if err != nil || name != want[0] || desc != want[1] {
			t.Fatalf("SERVER %d = %q %q %v, want %q", i, name, desc, err, want)
		}
	}
	if r := rc.option(proto.OptList, []byte{1}); r[0].typ != proto.RepErrInvalid {
		t.Fatalf("LIST with data: %v", r[0].typ)
	}
	// Two exports and no DefaultExport: the empty name is unknown.
	if r := rc.option(proto.OptInfo, proto.AppendInfoRequest(nil, proto.InfoRequest{})); r[0].typ != proto.RepErrUnknown {
		t.Fatalf("INFO for the default export: %v", r[0].typ)
	}
}

// Spec NBD_OPT_INFO / NBD_OPT_GO and "Block size constraints".
func TestHandshakeInfo(t *testing.T) {
	_, addr := serveMem(t, 8<<20, 4096)
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	req := proto.AppendInfoRequest(nil, proto.InfoRequest{Name: "mem", Infos: []proto.InfoType{proto.InfoName, proto.InfoDescription, proto.InfoBlockSize}})
	got := map[proto.InfoType]proto.Info{}
	for _, r := range rc.option(proto.OptInfo, req) {
		if r.typ == proto.RepInfo {
			in, err := proto.ParseInfo(r.data)
			mustf(t, err, "info reply %x", r.data)
			got[in.Type] = in
		}
	}
	want := proto.TransmissionFlags(proto.FlagHasFlags | proto.FlagSendFlush | proto.FlagSendFUA | proto.FlagSendTrim |
		proto.FlagSendWriteZeroes | proto.FlagSendFastZero | proto.FlagCanMultiConn | proto.FlagSendCache)
	if e := got[proto.InfoExport]; e.Size != 8<<20 || e.Flags != want {
		t.Fatalf("INFO_EXPORT %+v, want flags %#x", e, want)
	}
	if got[proto.InfoName].Name != "mem" || got[proto.InfoDescription].Description != "test export" {
		t.Fatalf("INFO name/description %+v", got)
	}
	bs := got[proto.InfoBlockSize].BlockSize
	if bs != (proto.BlockSize{Min: 512, Preferred: 4096, Max: DefaultMaxRequest}) || bs.Validate() != nil {
		t.Fatalf("INFO_BLOCK_SIZE %+v", bs)
	}
	bad := proto.AppendInfoRequest(nil, proto.InfoRequest{Name: "nope"})
	if r := rc.option(proto.OptGo, bad); r[0].typ != proto.RepErrUnknown {
		t.Fatalf("GO unknown export: %v", r[0].typ)
	}
	if r := rc.option(proto.OptGo, []byte{0, 0, 0, 9}); r[0].typ != proto.RepErrInvalid {
		t.Fatalf("GO malformed: %v", r[0].typ)
	}
	if r := rc.option(proto.OptStructuredReply, []byte{1}); r[0].typ != proto.RepErrInvalid {
		t.Fatalf("STRUCTURED_REPLY with data: %v", r[0].typ)
	}
	if _, flags := rc.goExport("mem", true); flags != want|proto.FlagSendDF {
		t.Fatalf("GO flags with structured replies %#x", flags)
	}
}

// Spec "Metadata querying", NBD_OPT_LIST_META_CONTEXT / SET_META_CONTEXT.
func TestHandshakeMetaContext(t *testing.T) {
	_, addr := serveMem(t, 1<<20, 512)
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	q := func(qs ...string) []byte {
		return proto.AppendMetaContextRequest(nil, proto.MetaContextRequest{Name: "mem", Queries: qs})
	}
	if r := rc.option(proto.OptListMetaContext, q()); r[0].typ != proto.RepErrInvalid {
		t.Fatalf("LIST_META_CONTEXT before STRUCTURED_REPLY: %v", r[0].typ)
	}
	rc.option(proto.OptStructuredReply, nil)
	if r := rc.option(proto.OptStructuredReply, nil); r[0].typ != proto.RepErrInvalid {
		t.Fatalf("second STRUCTURED_REPLY: %v", r[0].typ)
	}
	for _, tc := range []struct {
		opt   proto.Option
		query []byte
		want  []proto.ReplyType
		id    uint32
	}{
		{proto.OptListMetaContext, q(), []proto.ReplyType{proto.RepMetaContext, proto.RepAck}, 0},
		{proto.OptListMetaContext, q("base:"), []proto.ReplyType{proto.RepMetaContext, proto.RepAck}, 0},
		{proto.OptListMetaContext, q("qemu:"), []proto.ReplyType{proto.RepAck}, 0},
		{proto.OptListMetaContext, q("nonamespace"), []proto.ReplyType{proto.RepErrInvalid}, 0},
		{proto.OptSetMetaContext, q(), []proto.ReplyType{proto.RepAck}, 0},
		{proto.OptSetMetaContext, q("qemu:dirty-bitmap:x", "base:allocation"), []proto.ReplyType{proto.RepMetaContext, proto.RepAck}, metaContextID},
		{proto.OptSetMetaContext, []byte{0, 0, 0, 1}, []proto.ReplyType{proto.RepErrInvalid}, 0},
		{proto.OptSetMetaContext, proto.AppendMetaContextRequest(nil, proto.MetaContextRequest{Name: "x"}), []proto.ReplyType{proto.RepErrUnknown}, 0},
	} {
		r := rc.option(tc.opt, tc.query)
		if len(r) != len(tc.want) {
			t.Fatalf("%v %x: replies %+v, want %v", tc.opt, tc.query, r, tc.want)
		}
		for i := range r {
			if r[i].typ != tc.want[i] {
				t.Fatalf("%v %x: reply %d is %v, want %v", tc.opt, tc.query, i, r[i].typ, tc.want[i])
			}
		}
		if r[0].typ == proto.RepMetaContext {
			id, name, err := proto.ParseMetaContext(r[0].data)
			if err != nil || id != tc.id || name != proto.MetaContextBaseAllocation {
				t.Fatalf("META_CONTEXT %d %q %v, want id %d", id, name, err, tc.id)
			}
		}
	}
}

// Spec NBD_OPT_ABORT: ACK, then the server closes.
func TestHandshakeAbort(t *testing.T) {
	_, addr := serveMem(t, 1<<20, 512)
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	if r := rc.option(proto.OptAbort, nil); r[0].typ != proto.RepAck {
		t.Fatalf("ABORT: %v", r[0].typ)
	}
	rc.expectClosed()
}

// A server may drop a client that sends an absurdly long option, or bytes
// that are not an option at all.
func TestHandshakeHostileOptions(t *testing.T) {
	_, addr := serveMem(t, 1<<20, 512)
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.write(proto.AppendOption(nil, proto.OptGo, nil)[:12])
	rc.write([]byte{0, 0x10, 0, 0}) // 1 MiB of option data announced
	rc.expectClosed()

	rc = dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	rc.expectClosed()
}

// The preferred block size is the device's optimal IO size when it has one
// that fits in a request, so that clients that size requests by it (nbdcopy)
// write whole stripes; otherwise it stays max(4096, block size).
func TestPreferredBlockSize(t *testing.T) {
	for _, tc := range []struct {
		opt, maxRequest int
		want            uint32
	}{
		{512 << 10, 0, 512 << 10},
		{512 << 10, 256 << 10, 4096}, // over the maximum payload
		{384 << 10, 0, 4096},         // not a power of two
		{2048, 0, 4096},              // below the block size
		{0, 0, 4096},
	} {
		dev := devtest.OptimalIO{Device: newMem(t, 8<<20, 4096), Optimal: tc.opt}
		_, addr := serve(t, Options{Exports: map[string]Export{"v": {Device: dev}}, MaxRequest: tc.maxRequest}, "tcp")
		rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
		req := proto.AppendInfoRequest(nil, proto.InfoRequest{Name: "v", Infos: []proto.InfoType{proto.InfoBlockSize}})
		var bs proto.BlockSize
		for _, r := range rc.option(proto.OptInfo, req) {
			if in, err := proto.ParseInfo(r.data); r.typ == proto.RepInfo && err == nil && in.Type == proto.InfoBlockSize {
				bs = in.BlockSize
			}
		}
		if bs.Preferred != tc.want || bs.Validate() != nil {
			t.Errorf("optimal IO %d, max request %d: INFO_BLOCK_SIZE %+v, want preferred %d", tc.opt, tc.maxRequest, bs, tc.want)
		}
	}
}
