package meta

import (
	"errors"
	"strings"
	"testing"
)

func TestLabelRoundTripAndChecks(t *testing.T) {
	want := Label{ClusterID: "3f1c0a2e-0000-4000-8000-000000000001", Namespace: "h1-n2", SlotSize: 1 << 30}
	b, err := EncodeLabel(want)
	if err != nil || len(b) != LabelSize {
		t.Fatalf("encode: %d bytes, %v", len(b), err)
	}
	if string(b[:8]) != "NVSTRIPE" {
		t.Fatalf("magic %q", b[:8])
	}
	if got, err := DecodeLabel(b); err != nil || got != want {
		t.Fatalf("decode: %+v %v", got, err)
	}
	if err := CheckLabel(b, want); err != nil {
		t.Fatal(err)
	}
	other := want
	other.Namespace = "h9-n1"
	if err := CheckLabel(b, other); !errors.Is(err, ErrLabelMismatch) || !strings.Contains(err.Error(), "h9-n1") {
		t.Fatalf("other namespace: %v", err)
	}
	if err := CheckLabel(make([]byte, LabelSize), want); !errors.Is(err, ErrNoLabel) {
		t.Fatalf("blank: %v", err)
	}
	lastByte := make([]byte, LabelSize)
	lastByte[LabelSize-1] = 1
	if err := CheckLabel(lastByte, want); !errors.Is(err, ErrLabelMismatch) {
		t.Fatalf("blank but its last byte: %v", err)
	}
	foreign := make([]byte, LabelSize)
	copy(foreign, "\x7fELF")
	if err := CheckLabel(foreign, want); !errors.Is(err, ErrLabelMismatch) || !strings.Contains(err.Error(), "other data") {
		t.Fatalf("foreign data: %v", err)
	}
	flipped := append([]byte(nil), b...)
	flipped[30] ^= 1
	if _, err := DecodeLabel(flipped); !errors.Is(err, ErrLabelMismatch) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("flipped bit: %v", err)
	}
	if _, err := DecodeLabel(b[:100]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("short: %v", err)
	}
	if _, err := EncodeLabel(Label{ClusterID: strings.Repeat("x", 65), Namespace: "n", SlotSize: 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("long id: %v", err)
	}
}

func TestAllocRecordBitmap(t *testing.T) {
	a := newAlloc(10)
	var got []int64
	for {
		s := a.take()
		if s < 0 {
			break
		}
		got = append(got, s)
	}
	if len(got) != 9 || got[0] != 1 || got[8] != 9 || a.Used != 9 || a.check() != nil {
		t.Fatalf("took %v used %d check %v", got, a.Used, a.check())
	}
	if err := a.release(4); err != nil || a.take() != 4 {
		t.Fatal("released slot not reused first")
	}
	if err := a.release(0); err == nil {
		t.Fatal("released the label slot")
	}
	_ = a.release(5)
	if err := a.release(5); err == nil {
		t.Fatal("double free accepted")
	}
	a.Bitmap[1] |= 0x80 // slot 15, past the end
	if a.check() == nil {
		t.Fatal("bit past the end accepted")
	}
}

func TestDecodeStrict(t *testing.T) {
	for _, v := range []string{
		``, `null`, `{"v":1}`, `{"v":1,"name":"h","x":1}`, `{"v":0,"name":"h"}`, `{"v":1,"name":"h"}{}`, `{"v":1,"name":"a/b"}`,
	} {
		if err := decode("k", []byte(v), &HostRecord{}); !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), "record k") {
			t.Errorf("%q: %v", v, err)
		}
	}
	if err := decode("k", []byte(`{"v":1,"name":"h","labels":{"rack":"r1"}}`), &HostRecord{}); err != nil {
		t.Errorf("valid host: %v", err)
	}
}
