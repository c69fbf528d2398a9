package pdu

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestResvCmdEncoding pins CDW10 to the bit positions of the spec: the
// Linux host's register (CPTPL 11b), an acquire preempt-and-abort of type
// 5, a release clear with IEKEY.
func TestResvCmdEncoding(t *testing.T) {
	for _, c := range []struct {
		cmd  ResvCmd
		want uint32
	}{
		{ResvCmd{Action: ResvRegisterActionRegister, CPTPL: 3}, 0xC0000000},
		{ResvCmd{Action: ResvAcquireActionPreemptAbrt, Type: ResvWriteExclusiveAllRegs}, 0x00000502},
		{ResvCmd{Action: ResvReleaseActionClear, IEKey: true}, 0x00000009},
	} {
		if got := c.cmd.CDW10(); got != c.want {
			t.Errorf("%+v: CDW10 %#x, want %#x", c.cmd, got, c.want)
		}
		if back := ParseResvCmd(c.want); back != c.cmd {
			t.Errorf("ParseResvCmd(%#x) = %+v, want %+v", c.want, back, c.cmd)
		}
	}
}

// TestResvStatusLayout checks the extended report's byte offsets and that
// entries beyond the host's buffer are left out while REGCTL still counts
// them.
func TestResvStatusLayout(t *testing.T) {
	s := ResvStatus{Gen: 0x01020304, Type: ResvExclusiveAccessRegOnly, PTPL: true, Registrants: []Registrant{
		{CNTLID: 0xFFFF, Holder: true, Key: 0x1122334455667788, HostID: [16]byte{0: 0xAB, 15: 0xCD}},
		{CNTLID: 0xFFFF, Key: 2},
		{CNTLID: 0xFFFF, Key: 3},
	}}
	b := s.MarshalExt(ResvReportHeaderLen + 2*ResvReportEntryLen)
	le := binary.LittleEndian
	if len(b) != 192 || le.Uint32(b) != 0x01020304 || b[4] != 4 || le.Uint16(b[5:]) != 3 || b[9] != 1 {
		t.Fatalf("header %x (len %d)", b[:16], len(b))
	}
	if le.Uint16(b[64:]) != 0xFFFF || b[66] != 1 || le.Uint64(b[72:]) != 0x1122334455667788 || b[80] != 0xAB || b[95] != 0xCD {
		t.Fatalf("first entry %x", b[64:128])
	}
	got, err := ParseResvStatusExt(b)
	if err != nil || got.Count != 3 || len(got.Registrants) != 2 || got.Registrants[0] != s.Registrants[0] ||
		got.Registrants[1] != s.Registrants[1] || got.Gen != s.Gen || got.Type != s.Type || !got.PTPL {
		t.Fatalf("parsed %+v, %v", got, err)
	}
	if _, err := ParseResvStatusExt(b[:63]); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("63-byte report: %v, want ErrInvalidData", err)
	}
	if _, _, err := ParseResvKeys(make([]byte, 7)); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("7-byte key data: %v, want ErrInvalidData", err)
	}
}

// FuzzParseResvStatusExt: any bytes parse without panic into at most
// REGCTL entries that all lie inside the input.
func FuzzParseResvStatusExt(f *testing.F) {
	s := ResvStatus{Type: ResvWriteExclusive, Registrants: []Registrant{{Key: 1}, {Key: 2}}}
	f.Add(s.MarshalExt(192))
	f.Add(s.MarshalExt(100))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseResvStatusExt(b)
		if err != nil {
			return
		}
		if len(st.Registrants) > st.Count || ResvReportHeaderLen+len(st.Registrants)*ResvReportEntryLen > len(b) {
			t.Fatalf("%d entries (count %d) from %d bytes", len(st.Registrants), st.Count, len(b))
		}
	})
}
