package pdu

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

// hexBytes decodes a hex string that may contain spaces and '|' separators.
func hexBytes(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func pad(b []byte, n int) []byte { return append(b, make([]byte, n-len(b))...) }

// A.1.10: CRC32C check value.
func TestDigestCheckValue(t *testing.T) {
	if got := Digest([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("crc32c = %08x, want e3069283", got)
	}
	if got := DigestUpdate(DigestUpdate(0, []byte("1234")), []byte("56789")); got != 0xE3069283 {
		t.Fatalf("incremental crc32c = %08x", got)
	}
}

// A.1.5: ICReq as the Linux host sends it with both digests requested.
func TestICReqVector(t *testing.T) {
	want := pad(hexBytes(t, "00 00 80 00 80000000 | 0000 00 03 00000000"), 128)
	m := ICReq{Digests: Digests{Header: true, Data: true}}
	if got := m.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("ICReq encoding\n got %x\nwant %x", got, want)
	}
	p, _, err := ReadPDU(bytes.NewReader(want), nil, 0, Digests{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Header.Type != TypeICReq || ParseICReq(p.Hdr) != m {
		t.Fatalf("decoded %+v %+v", p.Header, ParseICReq(p.Hdr))
	}
}

// A.1.5: ICResp as nvmet sends it: CPDA 0, MAXH2CDATA 4 MiB, header digest.
func TestICRespVector(t *testing.T) {
	want := pad(hexBytes(t, "01 00 80 00 80000000 | 0000 00 01 00004000"), 128)
	m := ICResp{Digests: Digests{Header: true}, MaxH2CData: 0x400000}
	if got := m.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("ICResp encoding\n got %x\nwant %x", got, want)
	}
	if got := ParseICResp(want); got != m {
		t.Fatalf("decoded %+v", got)
	}
}

// A.1.7, A.2.1, A.3.2: an admin Connect capsule with its 1024 bytes of
// in-capsule data (SGL 0x01), SQSIZE 31, KATO 5000 ms, cid 0x1005.
func TestConnectCapsuleVector(t *testing.T) {
	hdr := hexBytes(t, `04 00 48 48 48040000
		7f 40 0510 01000000 00000000 00000000 0000000000000000
		0000000000000000 00040000 000000 01
		00000000 1f000000 88130000 00000000 00000000 00000000`)
	if len(hdr) != 72 {
		t.Fatalf("vector is %d bytes", len(hdr))
	}
	cd := ConnectData{CNTLID: 0xFFFF, SubNQN: "nqn.2024-01.io.nvstripe:t1", HostNQN: "nqn.2014-08.org.nvmexpress:uuid:1"}
	cd.HostID[0] = 0xAB
	data := cd.Marshal()
	sqe := ConnectCmd{SQSize: 31, KATO: 5000}.SQE(0x1005)
	got := AppendCapsuleCmd(nil, &sqe, data, Digests{})
	if !bytes.Equal(got[:72], hdr) {
		t.Fatalf("connect header\n got %x\nwant %x", got[:72], hdr)
	}
	p, _, err := ReadPDU(bytes.NewReader(got), nil, 8192, Digests{})
	if err != nil {
		t.Fatal(err)
	}
	s := ParseCapsuleCmd(p.Hdr)
	if s.Opcode != OpFabrics || s.FCType() != FabricsConnect || s.CID != 0x1005 || s.SGL.ID != SGLInCapsule {
		t.Fatalf("sqe %+v", s)
	}
	if c := ParseConnectCmd(&s); c.QID != 0 || c.SQSize != 31 || c.KATO != 5000 {
		t.Fatalf("connect %+v", c)
	}
	d, err := ParseConnectData(p.Data)
	if err != nil || d != cd {
		t.Fatalf("connect data %+v %v", d, err)
	}
}

// A.2.2, A.4.8: a CapsuleResp for cid 0x3001 with ANA Inaccessible (0x302)
// and DNR: wire status (0x302<<1)|0x8000 = 0x8604.
func TestCapsuleRespVector(t *testing.T) {
	want := hexBytes(t, "05 00 18 00 18000000 | 01000000 00000000 0000 0100 0130 0486")
	cqe := CQE{DW0: 1, SQID: 1, CID: 0x3001, Status: MakeStatus(SCANAInaccessible, true)}
	if got := AppendCapsuleResp(nil, &cqe, Digests{}); !bytes.Equal(got, want) {
		t.Fatalf("capsule resp\n got %x\nwant %x", got, want)
	}
	got := ParseCapsuleResp(want)
	if got != cqe || got.Status.Code() != SCANAInaccessible || !got.Status.DNR() || got.Status.SCT() != 3 || got.Status.SC() != 2 {
		t.Fatalf("decoded %+v", got)
	}
}

// A.1.8, A.1.10: C2HData with both digests: pdo = 24+4, plen = 28+len+4,
// flags HDGSTF|DDGSTF|LAST|SUCCESS.
func TestC2HDataVector(t *testing.T) {
	data := []byte("123456789")
	dg := Digests{Header: true, Data: true}
	b := AppendData(nil, TypeC2HData, FlagLastPDU|FlagSuccess, DataHdr{CCCID: 0x2007, DataO: 0}, data, dg)
	wantHdr := hexBytes(t, "07 0f 18 1c 29000000 | 0720 0000 00000000 09000000 00000000")
	if !bytes.Equal(b[:24], wantHdr) {
		t.Fatalf("c2h header\n got %x\nwant %x", b[:24], wantHdr)
	}
	if d := le.Uint32(b[24:]); d != Digest(wantHdr) {
		t.Fatalf("header digest %08x", d)
	}
	if d := le.Uint32(b[len(b)-4:]); d != 0xE3069283 {
		t.Fatalf("data digest %08x", d)
	}
	p, _, err := ReadPDU(bytes.NewReader(b), nil, 4096, dg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.Data, data) || ParseDataHdr(p.Hdr).DataL != 9 {
		t.Fatalf("decoded %+v", p)
	}
}

// A.1.9: R2T with a header digest.
func TestR2TVector(t *testing.T) {
	want := hexBytes(t, "09 01 18 00 1c000000 | 0300 0700 00100000 00800000 00000000")
	b := AppendR2T(nil, R2T{CCCID: 3, TTAG: 7, R2TO: 0x1000, R2TL: 0x8000}, Digests{Header: true})
	if !bytes.Equal(b[:24], want) || len(b) != 28 {
		t.Fatalf("r2t\n got %x\nwant %x", b, want)
	}
	p, _, err := ReadPDU(bytes.NewReader(b), nil, 0, Digests{Header: true})
	if err != nil || ParseR2T(p.Hdr) != (R2T{CCCID: 3, TTAG: 7, R2TO: 0x1000, R2TL: 0x8000}) {
		t.Fatalf("decoded %+v %v", p, err)
	}
}

// A.1.6: C2HTermReq with FES 1, FEI 4 (32-bit at offset 10), 8 bytes of
// offending header.
func TestTermReqVector(t *testing.T) {
	bad := hexBytes(t, "04 00 48 00 ffffff7f")
	want := hexBytes(t, "03 00 18 00 20000000 | 0100 04000000 00000000000000000000 | 04004800ffffff7f")
	b := AppendTermReq(nil, TypeC2HTermReq, TermReq{FES: 1, FEI: 4, Data: bad})
	if !bytes.Equal(b, want) {
		t.Fatalf("termreq\n got %x\nwant %x", b, want)
	}
	p, _, err := ReadPDU(bytes.NewReader(b), nil, 0, Digests{})
	if err != nil {
		t.Fatal(err)
	}
	tr := ParseTermReq(p.Hdr, p.Data)
	if tr.FES != 1 || tr.FEI != 4 || !bytes.Equal(tr.Data, bad) {
		t.Fatalf("decoded %+v", tr)
	}
}

// A.1.2-A.1.6: malformed headers give the FES/FEI a TermReq must carry.
func TestReadHeaderErrors(t *testing.T) {
	hd := Digests{Header: true}
	cases := []struct {
		name string
		in   string
		dg   Digests
		max  int
		fes  uint16
		fei  uint32
	}{
		{"reserved type 8", "08 00 18 00 18000000", Digests{}, 0, FESInvalidHeaderField, OffType},
		{"unknown type ff", "ff 00 18 00 18000000", Digests{}, 0, FESInvalidHeaderField, OffType},
		{"capsule hlen 24", "04 00 18 00 18000000", Digests{}, 0, FESInvalidHeaderField, OffHLen},
		{"icreq plen 129", "00 00 80 00 81000000", Digests{}, 0, FESInvalidHeaderField, OffPLen},
		{"icreq pdo", "00 00 80 04 80000000", Digests{}, 0, FESInvalidHeaderField, OffPDO},
		{"icreq digest flag", "00 01 80 00 80000000", Digests{}, 0, FESInvalidHeaderField, OffFlags},
		{"capsule plen short", "04 00 48 00 40000000", Digests{}, 0, FESInvalidHeaderField, OffPLen},
		{"capsule oversized", "04 00 48 48 ffffff7f", Digests{}, 8192, FESDataLimitExceeded, 0},
		{"capsule pdo inside header", "04 00 48 10 00010000", Digests{}, 8192, FESInvalidHeaderField, OffPDO},
		{"hdgst missing", "04 00 48 00 48000000", hd, 0, FESInvalidHeaderField, OffFlags},
		{"hdgst not negotiated", "04 01 48 00 4c000000", Digests{}, 0, FESInvalidHeaderField, OffFlags},
		{"ddgst not negotiated", "06 02 18 18 20000000", Digests{}, 4096, FESInvalidHeaderField, OffFlags},
		{"h2cdata without data", "06 00 18 00 18000000", Digests{}, 4096, FESInvalidHeaderField, OffPLen},
		{"r2t with pdo", "09 00 18 18 20000000", Digests{}, 4096, FESInvalidHeaderField, OffPDO},
		{"resp plen", "05 00 18 00 1c000000", Digests{}, 0, FESInvalidHeaderField, OffPLen},
		{"success without last", "07 08 18 18 1c000000", Digests{}, 4096, FESInvalidHeaderField, OffFlags},
		{"termreq too long", "02 00 18 00 99000000", Digests{}, 0, FESInvalidHeaderField, OffPLen},
		{"termreq too short", "02 00 18 00 10000000", Digests{}, 0, FESInvalidHeaderField, OffPLen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := pad(hexBytes(t, c.in), 256)
			_, err := ReadHeader(bytes.NewReader(in), make([]byte, MaxHeaderLen), c.dg, c.max)
			var fe *FatalError
			if !errors.As(err, &fe) || !errors.Is(err, ErrProtocol) {
				t.Fatalf("err = %v, want a FatalError", err)
			}
			if fe.FES != c.fes || fe.FEI != c.fei {
				t.Fatalf("fes/fei = %d/%d, want %d/%d (%v)", fe.FES, fe.FEI, c.fes, c.fei, err)
			}
			if len(fe.Hdr) != CommonHeaderLen || !bytes.Equal(fe.Hdr, in[:8]) {
				t.Fatalf("offending header copy %x", fe.Hdr)
			}
		})
	}
}

// A.1.10: a wrong header digest is FES 3 with the received digest in FEI.
func TestHeaderDigestError(t *testing.T) {
	sqe := SQE{Opcode: IORead, CID: 9}
	b := AppendCapsuleCmd(nil, &sqe, nil, Digests{Header: true})
	b[72] ^= 0xFF
	got := le.Uint32(b[72:])
	_, err := ReadHeader(bytes.NewReader(b), make([]byte, MaxHeaderLen), Digests{Header: true}, 0)
	var fe *FatalError
	if !errors.As(err, &fe) || fe.FES != FESHeaderDigest || fe.FEI != got || len(fe.Hdr) != CapsuleCmdLen {
		t.Fatalf("err = %v", err)
	}
}

// A.1.10: a data digest mismatch consumes the PDU; the next one still reads.
func TestDataDigestMismatchKeepsStream(t *testing.T) {
	dg := Digests{Data: true}
	b := AppendData(nil, TypeH2CData, FlagLastPDU, DataHdr{CCCID: 1, TTAG: 2}, []byte("abcdefgh"), dg)
	b[len(b)-1] ^= 1
	b = AppendR2T(b, R2T{CCCID: 5, R2TL: 4096}, dg)
	r := bytes.NewReader(b)
	_, _, err := ReadPDU(r, nil, 4096, dg)
	if !errors.Is(err, ErrDataDigest) || errors.Is(err, ErrProtocol) {
		t.Fatalf("err = %v, want ErrDataDigest", err)
	}
	p, _, err := ReadPDU(r, nil, 4096, dg)
	if err != nil || p.Header.Type != TypeR2T || ParseR2T(p.Hdr).CCCID != 5 {
		t.Fatalf("next pdu %+v %v", p.Header, err)
	}
}

func TestReadEOF(t *testing.T) {
	buf := make([]byte, MaxHeaderLen)
	if _, err := ReadHeader(bytes.NewReader(nil), buf, Digests{}, 0); err != io.EOF {
		t.Fatalf("empty: %v", err)
	}
	if _, err := ReadHeader(bytes.NewReader([]byte{4, 0, 72}), buf, Digests{}, 0); err != io.ErrUnexpectedEOF {
		t.Fatalf("partial common header: %v", err)
	}
	b := AppendCapsuleCmd(nil, &SQE{}, make([]byte, 100), Digests{})
	if _, _, err := ReadPDU(bytes.NewReader(b[:50]), nil, 4096, Digests{}); err != io.ErrUnexpectedEOF {
		t.Fatalf("partial header: %v", err)
	}
	if _, _, err := ReadPDU(bytes.NewReader(b[:150]), nil, 4096, Digests{}); err != io.ErrUnexpectedEOF {
		t.Fatalf("partial data: %v", err)
	}
}

// A.1.11: padding between header and data is skipped (pdo honoured).
func TestPaddedData(t *testing.T) {
	b := hexBytes(t, "06 04 18 20 24000000 | 0100 0200 00000000 04000000 00000000")
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b = append(b, "WXYZ"...)
	p, _, err := ReadPDU(bytes.NewReader(b), nil, 4096, Digests{})
	if err != nil || string(p.Data) != "WXYZ" || p.Header.PadLen() != 8 {
		t.Fatalf("padded: %+v %q %v", p.Header, p.Data, err)
	}
}

func TestRoundTripAllTypes(t *testing.T) {
	for _, dg := range []Digests{{}, {Header: true}, {Data: true}, {Header: true, Data: true}} {
		var b []byte
		sqe := SQE{Opcode: IOWrite, Flags: PSDTSGL, CID: 0xF00D, NSID: 1, SGL: SGL{Length: 512, ID: SGLInCapsule}}
		sqe.SetRW(1<<40+5, 1)
		data := bytes.Repeat([]byte{0x5A}, 512)
		b = AppendCapsuleCmd(b, &sqe, data, dg)
		b = AppendCapsuleCmd(b, &SQE{Opcode: IOFlush, CID: 2}, nil, dg)
		b = AppendCapsuleResp(b, &CQE{CID: 2, SQHD: 0xFFFF}, dg)
		b = AppendData(b, TypeH2CData, FlagLastPDU, DataHdr{CCCID: 7, TTAG: 1, DataO: 4096}, data, dg)
		b = AppendR2T(b, R2T{CCCID: 8, R2TL: 8192}, dg)
		r := bytes.NewReader(b)
		var buf []byte
		types := []Type{TypeCapsuleCmd, TypeCapsuleCmd, TypeCapsuleResp, TypeH2CData, TypeR2T}
		for i, want := range types {
			var p PDU
			var err error
			p, buf, err = ReadPDU(r, buf, 4096, dg)
			if err != nil || p.Header.Type != want {
				t.Fatalf("dg %+v pdu %d: %+v %v", dg, i, p.Header, err)
			}
			if i == 0 {
				s := ParseCapsuleCmd(p.Hdr)
				if s != sqe || !bytes.Equal(p.Data, data) || s.SLBA() != 1<<40+5 || s.NLB() != 1 {
					t.Fatalf("capsule %+v", s)
				}
			}
		}
		if r.Len() != 0 {
			t.Fatalf("%d bytes left", r.Len())
		}
	}
}

// A.2.2: status field helpers.
func TestStatusField(t *testing.T) {
	s := MakeStatus(SCLBAOutOfRange, true)
	if uint16(s) != 0x8100 || s.Code() != SCLBAOutOfRange || s.SCT() != 0 || s.SC() != 0x80 || !s.DNR() || s.More() {
		t.Fatalf("status %04x", uint16(s))
	}
	s = Status(0x4000 | 0x2000 | 0x0304<<1)
	if s.Code() != 0x304 || s.CRD() != 2 || !s.More() || s.DNR() {
		t.Fatalf("status %04x: %v", uint16(s), s)
	}
	if !MakeStatus(SCANATransition, false).Code().IsANAError() || SCInternalPathError.IsANAError() || !SCInternalPathError.IsPathError() {
		t.Fatal("path/ana classification")
	}
	if !Status(0).Success() || Status(1).Code() != 0 {
		t.Fatal("phase bit must not count")
	}
}

// A.2.1: the SQE offsets.
func TestSQELayout(t *testing.T) {
	s := SQE{Opcode: 1, Flags: 0x40, CID: 0x0203, NSID: 0x04050607, CDW2: 8, CDW3: 9, MPTR: 10,
		SGL: SGL{Addr: 11, Length: 12, ID: 0x5A}, CDW10: 13, CDW11: 14, CDW12: 15, CDW13: 16, CDW14: 17, CDW15: 18}
	b := make([]byte, 64)
	s.Put(b)
	want := hexBytes(t, `01 40 0302 07060504 08000000 09000000 0a00000000000000
		0b00000000000000 0c000000 000000 5a 0d000000 0e000000 0f000000 10000000 11000000 12000000`)
	if !bytes.Equal(b, want) {
		t.Fatalf("sqe\n got %x\nwant %x", b, want)
	}
	var d SQE
	d.Parse(b)
	if d != s || d.SGL.Type() != 5 || d.SGL.Subtype() != 0xA {
		t.Fatalf("parsed %+v", d)
	}
}

// A.3.3: Property Get/Set field placement.
func TestPropertyCmd(t *testing.T) {
	s := PropertyCmd{Offset: PropCC, Value: uint64(HostCC(0, true))}.SetSQE(3)
	b := make([]byte, 64)
	s.Put(b)
	if b[0] != 0x7F || b[4] != FabricsPropertySet || b[40] != 0 || le.Uint32(b[44:]) != 0x14 || le.Uint32(b[48:]) != 0x00460001 {
		t.Fatalf("property set sqe %x", b)
	}
	g := PropertyCmd{Size8: true, Offset: PropCAP}.GetSQE(4)
	if p := ParsePropertyCmd(&g); !p.Size8 || p.Offset != 0 || g.FCType() != FabricsPropertyGet {
		t.Fatalf("get %+v", p)
	}
	cc := HostCC(6, true)
	if CCIOSQES(cc) != 6 || CCIOCQES(cc) != 4 || CCCSS(cc) != 6 || CCMPS(cc) != 0 || cc&CCEnable == 0 {
		t.Fatalf("cc %08x", cc)
	}
}

// A.4.5: Get Log Page NUMDL/NUMDU/LPO placement.
func TestGetLogPageCmd(t *testing.T) {
	g := GetLogPageCmd{LID: LogANA, LSP: ANALSPRGO, RAE: true, NumD: 0x12345 + 1, Offset: 0x100000008}
	s := g.SQE(1, 0xFFFFFFFF)
	b := make([]byte, 64)
	s.Put(b)
	want := hexBytes(t, "0c 81 4523 0100 0000 08000000 01000000")
	if !bytes.Equal(b[40:56], want) {
		t.Fatalf("cdw10-13 %x want %x", b[40:56], want)
	}
	if got := ParseGetLogPageCmd(&s); got != g {
		t.Fatalf("parsed %+v", got)
	}
}

func TestConnectDataErrors(t *testing.T) {
	b := make([]byte, ConnectDataLen)
	for i := 256; i < 512; i++ {
		b[i] = 'a'
	}
	if _, err := ParseConnectData(b); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("unterminated subnqn: %v", err)
	}
	if _, err := ParseConnectData(b[:100]); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("short: %v", err)
	}
	b[256], b[257] = 'x', 1
	if _, err := ParseConnectData(b); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("control byte: %v", err)
	}
}

// A.4.2: the Identify Controller offsets the Linux host checks.
func TestIdentifyControllerOffsets(t *testing.T) {
	c := IdentifyController{SN: "SN1", MN: "model", FR: "1.0", CMIC: 0x0B, MDTS: 5, CNTLID: 0x1234,
		VER: MakeVersion(1, 4, 0), OAES: OAESANA | OAESNSAttr, CTRATT: CTRATTHostID128, CNTRLTYPE: 1,
		KAS: 10, ANATT: 10, ANACAP: 0x1F, ANAGRPMAX: 32, NANAGRPID: 32, SQES: 0x66, CQES: 0x44,
		MAXCMD: 128, NN: 1024, ONCS: ONCSDSM | ONCSWriteZeroes, VWC: 1, SGLS: SGLSSupported | SGLSOffsetData,
		MNAN: 1024, SubNQN: "nqn.x", IOCCSZ: 1028, IORCSZ: 1, MSDBD: 1, AERL: 3}
	b := c.Marshal()
	checks := []struct {
		off  int
		want []byte
	}{
		{4, []byte("SN1 ")}, {24, []byte("model ")}, {76, []byte{0x0B, 5, 0x34, 0x12, 0, 4, 1, 0}},
		{92, []byte{0, 0x09, 0, 0, 1, 0, 0, 0}}, {111, []byte{1}}, {259, []byte{3}}, {320, []byte{10, 0}},
		{342, []byte{10, 0x1F, 32, 0, 0, 0, 32, 0, 0, 0}}, {512, []byte{0x66, 0x44, 128, 0, 0, 4, 0, 0, 0x0C, 0}},
		{525, []byte{1}}, {536, []byte{1, 0, 0x10, 0, 0, 4, 0, 0}}, {768, []byte("nqn.x\x00")},
		{1792, []byte{0x04, 0x04, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1}},
	}
	for _, ck := range checks {
		if got := b[ck.off : ck.off+len(ck.want)]; !bytes.Equal(got, ck.want) {
			t.Errorf("offset %d: %x want %x", ck.off, got, ck.want)
		}
	}
	d, err := ParseIdentifyController(b)
	if err != nil || d != c || d.InCapsuleMax() != 16384 {
		t.Fatalf("round trip %+v %v", d, err)
	}
}

// A.4.2: Identify Namespace offsets.
func TestIdentifyNamespaceOffsets(t *testing.T) {
	n := IdentifyNamespace{NSZE: 0x100, NCAP: 0x100, NUSE: 0x80, NMIC: NMICShared, DLFEAT: 0x09,
		ANAGRPID: 7, LBAF: []LBAFormat{{LBADS: 12}}}
	n.NGUID[0], n.EUI64[7] = 0xAA, 0xBB
	b := n.Marshal()
	if le.Uint64(b[8:]) != 0x100 || b[30] != 1 || b[33] != 9 || le.Uint32(b[92:]) != 7 || b[104] != 0xAA || b[127] != 0xBB || b[130] != 12 {
		t.Fatalf("namespace bytes wrong")
	}
	d, err := ParseIdentifyNamespace(b)
	if err != nil || d.BlockSize() != 4096 || d.ANAGRPID != 7 || d.NGUID != n.NGUID {
		t.Fatalf("parsed %+v %v", d, err)
	}
	ind := IndependentNamespace{NMIC: 1, ANAGRPID: 7, NSTAT: 1}
	ib := ind.Marshal()
	if ib[1] != 1 || le.Uint32(ib[4:]) != 7 || ib[14] != 1 {
		t.Fatalf("cns 08h bytes %x", ib[:16])
	}
}

// A.4.2: descriptor list and namespace lists.
func TestNSLists(t *testing.T) {
	uuid := bytes.Repeat([]byte{1}, 16)
	b := MarshalNSDescList([]NSDescriptor{{NIDTUUID, uuid}, {NIDTCSI, []byte{0}}})
	want := append(append(hexBytes(t, "03 10 0000"), uuid...), hexBytes(t, "04 01 0000 00 00000000")...)
	if len(b) != 4096 || !bytes.Equal(b[:len(want)], want) {
		t.Fatalf("desc list %x", b[:32])
	}
	ds, err := ParseNSDescList(b)
	if err != nil || len(ds) != 2 || ds[1].Type != NIDTCSI {
		t.Fatalf("parsed %+v %v", ds, err)
	}
	if _, err := ParseNSDescList([]byte{3, 16, 0, 0, 1}); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("overrun: %v", err)
	}
	l := MarshalNSList([]uint32{1, 2, 9})
	if got := ParseNSList(l); len(got) != 3 || got[2] != 9 || le.Uint32(l[8:]) != 9 {
		t.Fatalf("ns list %v", got)
	}
}

// A.5.2: ANA log layout, RGO, and the host's validation.
func TestANALog(t *testing.T) {
	l := ANALog{ChangeCount: 5, Groups: []ANAGroupDesc{
		{GroupID: 1, ChangeCount: 5, State: ANAOptimized, NSIDs: []uint32{1, 3}},
		{GroupID: 2, ChangeCount: 2, State: ANAInaccessible},
	}}
	b := l.Append(nil, false)
	want := hexBytes(t, `0500000000000000 0200 000000000000
		01000000 02000000 0500000000000000 01 000000000000000000000000000000 01000000 03000000
		02000000 00000000 0200000000000000 03 000000000000000000000000000000`)
	if !bytes.Equal(b, want) {
		t.Fatalf("ana log\n got %x\nwant %x", b, want)
	}
	got, err := ParseANALog(b, 32)
	if err != nil || len(got.Groups) != 2 || got.Groups[0].NSIDs[1] != 3 || got.Groups[1].State != ANAInaccessible {
		t.Fatalf("parsed %+v %v", got, err)
	}
	if rgo := l.Append(nil, true); len(rgo) != 16+64 || le.Uint32(rgo[20:]) != 0 {
		t.Fatalf("rgo log %x", rgo)
	}
	bad := append([]byte(nil), b...)
	bad[32] = 5 // state 5 is not defined
	if _, err := ParseANALog(bad, 32); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("bad state: %v", err)
	}
	if _, err := ParseANALog(b, 1); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("group over max: %v", err)
	}
	if _, err := ParseANALog(b[:40], 32); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("truncated: %v", err)
	}
	if s, err := ParseANAState("Non-Optimized"); err != nil || s != ANANonOptimized || s.IOStatus() != SCSuccess {
		t.Fatal("parse state")
	}
}

// A.6: discovery log layout.
func TestDiscoveryLog(t *testing.T) {
	l := DiscoveryLog{GenCtr: 3, Entries: []DiscoveryEntry{{TrType: TrTypeTCP, AdrFam: AdrFamIPv4, SubType: SubTypeNVMe,
		TReq: TReqNotRequired, PortID: 1, CNTLID: 0xFFFF, ASQSZ: 32, TrSvcID: "4420", SubNQN: "nqn.a", TrAddr: "127.0.0.1"}}}
	b := l.Marshal()
	e := b[1024:]
	if len(b) != 2048 || le.Uint64(b[8:]) != 1 || e[0] != 3 || e[1] != 1 || e[2] != 2 || le.Uint16(e[6:]) != 0xFFFF ||
		string(e[32:36]) != "4420" || string(e[256:261]) != "nqn.a" || string(e[512:521]) != "127.0.0.1" {
		t.Fatalf("discovery bytes wrong")
	}
	got, err := ParseDiscoveryLog(b)
	if err != nil || len(got.Entries) != 1 || got.Entries[0] != l.Entries[0] {
		t.Fatalf("parsed %+v %v", got, err)
	}
	if _, err := ParseDiscoveryLog(b[:1500]); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("truncated: %v", err)
	}
}

// A.4.6: AER completion DW0.
func TestAEREvent(t *testing.T) {
	e := AEREvent{Type: AETypeNotice, Info: AENoticeANAChange, LogPage: LogANA}
	if e.DW0() != 0x000C0302 || ParseAEREvent(0x000C0302) != e {
		t.Fatalf("dw0 %08x", e.DW0())
	}
	if NumQueues(4, 4) != 0x00030003 {
		t.Fatal("num queues")
	}
	if s, c := ParseNumQueues(0x00070003); s != 4 || c != 8 {
		t.Fatal("parse num queues")
	}
}

// A.4.7: DSM ranges.
func TestDSMRanges(t *testing.T) {
	rs := []DSMRange{{NLB: 8, SLBA: 16}, {Attr: 1, NLB: 1, SLBA: 1 << 33}}
	b := AppendDSMRanges(nil, rs)
	if !bytes.Equal(b[:16], hexBytes(t, "00000000 08000000 1000000000000000")) {
		t.Fatalf("range %x", b[:16])
	}
	got, err := ParseDSMRanges(b, 2)
	if err != nil || got[1] != rs[1] {
		t.Fatalf("parsed %+v %v", got, err)
	}
	if _, err := ParseDSMRanges(b, 3); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("short: %v", err)
	}
}

// TestSkipNothingAllocatesNothing: a PDU without padding reads its data
// without allocating the scratch buffer that skipping padding needs.
func TestSkipNothingAllocatesNothing(t *testing.T) {
	r := bytes.NewReader(nil)
	if allocs := testing.AllocsPerRun(100, func() { _ = skip(r, 0) }); allocs != 0 {
		t.Fatalf("skip(0) allocated %v times per call, want 0", allocs)
	}
}
