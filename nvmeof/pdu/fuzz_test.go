package pdu

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the committed seed corpus under testdata/fuzz")

// seedPDUs are valid and malformed PDU streams used as fuzz seeds.
func seedPDUs() [][]byte {
	dg := Digests{Header: true, Data: true}
	sqe := ConnectCmd{SQSize: 31, KATO: 5000}.SQE(1)
	cd := ConnectData{CNTLID: 0xFFFF, SubNQN: "nqn.a", HostNQN: "nqn.h"}
	rd := SQE{Opcode: IORead, CID: 3, NSID: 1, SGL: SGL{Length: 4096, ID: SGLTransport}}
	return [][]byte{
		ICReq{Digests: dg}.Append(nil),
		ICResp{MaxH2CData: 1 << 20}.Append(nil),
		AppendCapsuleCmd(nil, &sqe, cd.Marshal(), Digests{}),
		AppendCapsuleCmd(nil, &rd, nil, dg),
		AppendCapsuleResp(nil, &CQE{CID: 3, Status: MakeStatus(SCLBAOutOfRange, true)}, dg),
		AppendData(nil, TypeC2HData, FlagLastPDU|FlagSuccess, DataHdr{CCCID: 3}, []byte("data"), dg),
		AppendData(nil, TypeH2CData, FlagLastPDU, DataHdr{CCCID: 3, TTAG: 1}, []byte("data"), Digests{}),
		AppendR2T(nil, R2T{CCCID: 3, R2TL: 4096}, dg),
		AppendTermReq(nil, TypeH2CTermReq, TermReq{FES: 1, FEI: 4, Data: []byte{4, 0, 72, 0, 0xff, 0xff, 0xff, 0x7f}}),
		{4, 0, 72, 72, 0xff, 0xff, 0xff, 0x7f},
		{8, 0, 24, 0, 24, 0, 0, 0},
	}
}

// FuzzReadPDU feeds arbitrary bytes to ReadPDU under each digest setting:
// it must never panic, must report malformed input as a FatalError or an
// io error, and what it accepts must respect the limits.
func FuzzReadPDU(f *testing.F) {
	for i, s := range seedPDUs() {
		f.Add(s, byte(i%4))
	}
	f.Fuzz(func(t *testing.T, in []byte, dgb byte) {
		dg := DigestsFromByte(dgb)
		r := bytes.NewReader(in)
		var buf []byte
		for {
			p, nb, err := ReadPDU(r, buf, 8192, dg)
			buf = nb
			if err != nil {
				var fe *FatalError
				if !errors.As(err, &fe) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrDataDigest) {
					t.Fatalf("unexpected error class: %v", err)
				}
				if fe != nil && len(fe.Hdr) > TermReqMaxData {
					t.Fatalf("fatal error copies %d header bytes", len(fe.Hdr))
				}
				return
			}
			if len(p.Data) != p.Header.DataLen() || len(p.Data) > 8192+TermReqMaxData || len(p.Hdr) != int(p.Header.HLen) {
				t.Fatalf("accepted pdu out of bounds: %+v data %d", p.Header, len(p.Data))
			}
		}
	})
}

// FuzzDecodeSQE checks that SQE and CQE decoding round-trips.
func FuzzDecodeSQE(f *testing.F) {
	for _, s := range seedPDUs() {
		if len(s) >= CapsuleCmdLen {
			f.Add(s[8:72])
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < SQELen {
			return
		}
		var s, s2 SQE
		s.Parse(in)
		b := make([]byte, SQELen)
		s.Put(b)
		s2.Parse(b)
		if s != s2 {
			t.Fatalf("sqe round trip %+v != %+v", s, s2)
		}
		var c, c2 CQE
		c.Parse(in)
		c.Put(b)
		c2.Parse(b)
		if c != c2 || !bytes.Equal(b[:CQELen], in[:CQELen]) {
			t.Fatalf("cqe round trip")
		}
		_ = ParseConnectCmd(&s)
		_ = ParseGetLogPageCmd(&s)
	})
}

// FuzzParseLogs feeds arbitrary bytes to the log page, identify and
// Connect data parsers: errors are fine, panics are not, and an accepted
// ANA log re-encodes to the same bytes.
func FuzzParseLogs(f *testing.F) {
	l := ANALog{ChangeCount: 1, Groups: []ANAGroupDesc{{GroupID: 1, State: ANAOptimized, NSIDs: []uint32{1, 2}}}}
	f.Add(l.Append(nil, false))
	d := DiscoveryLog{Entries: []DiscoveryEntry{{TrType: TrTypeTCP, SubNQN: "nqn.a"}}}
	f.Add(d.Marshal())
	cd := ConnectData{SubNQN: "nqn.a", HostNQN: "nqn.h"}
	f.Add(cd.Marshal())
	f.Add(MarshalNSDescList([]NSDescriptor{{NIDTUUID, make([]byte, 16)}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		if a, err := ParseANALog(in, 0); err == nil {
			out := a.Append(nil, false)
			if !bytes.Equal(out[:8], in[:8]) || len(out) > len(in) {
				t.Fatalf("ana log re-encode differs")
			}
		}
		_, _ = ParseDiscoveryLog(in)
		_, _ = ParseConnectData(in)
		_, _ = ParseNSDescList(in)
		_ = ParseNSList(in)
		_, _ = ParseIdentifyController(in)
		if n, err := ParseIdentifyNamespace(in); err == nil {
			_ = n.BlockSize()
		}
		_, _ = ParseDSMRanges(in, len(in)/DSMRangeLen)
	})
}

// TestSeedCorpus checks that the committed seed corpus under testdata/fuzz
// holds every seed (rewrite it with -update-corpus).
func TestSeedCorpus(t *testing.T) {
	dg := Digests{Header: true, Data: true}
	for i, s := range seedPDUs() {
		writeSeed(t, "FuzzReadPDU", fmt.Sprintf("[]byte(%q)\nbyte(%q)\n", s, byte(i%4)))
		if i == 3 {
			writeSeed(t, "FuzzReadPDU", fmt.Sprintf("[]byte(%q)\nbyte(%q)\n", s, dg.Byte()))
		}
		if len(s) >= CapsuleCmdLen {
			writeSeed(t, "FuzzDecodeSQE", fmt.Sprintf("[]byte(%q)\n", s[8:72]))
		}
	}
	l := ANALog{ChangeCount: 1, Groups: []ANAGroupDesc{{GroupID: 1, State: ANAOptimized, NSIDs: []uint32{1, 2}}}}
	writeSeed(t, "FuzzParseLogs", fmt.Sprintf("[]byte(%q)\n", l.Append(nil, false)))
	cd := ConnectData{SubNQN: "nqn.a", HostNQN: "nqn.h"}
	writeSeed(t, "FuzzParseLogs", fmt.Sprintf("[]byte(%q)\n", cd.Marshal()))
}

func writeSeed(t *testing.T, fuzzName, body string) {
	dir := filepath.Join("testdata", "fuzz", fuzzName)
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256([]byte(body))
	name := filepath.Join(dir, fmt.Sprintf("seed-%x", sum[:8]))
	want := []byte("go test fuzz v1\n" + body)
	if !*updateCorpus {
		if got, err := os.ReadFile(name); err != nil || !bytes.Equal(got, want) {
			t.Errorf("seed %s missing or stale (run go test -run TestSeedCorpus -update-corpus): %v", name, err)
		}
		return
	}
	if err := os.WriteFile(name, want, 0o644); err != nil {
		t.Fatal(err)
	}
}
