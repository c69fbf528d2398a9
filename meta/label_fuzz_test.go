package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// FuzzDecodeLabel feeds a namespace's first block (what any disk, or
// whoever wrote it, holds there) to DecodeLabel. With seal set the harness
// first pads the input to LabelSize and writes the checksum the decoder
// expects, so that the fuzzer reaches the fields behind it. Nothing may
// panic; an error is ErrInvalid (short input), ErrNoLabel or
// ErrLabelMismatch; a decoded label is one EncodeLabel writes (ids that
// are names, a positive slot size) and encodes to the input's bytes
// wherever the decoder reads them. The seed corpus is in testdata/fuzz.
func FuzzDecodeLabel(f *testing.F) {
	good, err := EncodeLabel(Label{ClusterID: "3f1c0a2e-0000-4000-8000-000000000001", Namespace: "h1-n2", SlotSize: 1 << 30})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(false, good)
	f.Add(true, good[:160])
	f.Fuzz(func(t *testing.T, seal bool, b []byte) {
		if seal {
			b = append(b, make([]byte, max(0, LabelSize-len(b)))...)
			binary.LittleEndian.PutUint32(b[labelCRCOff:], crc32.Checksum(b[:labelCRCOff], crc32.MakeTable(crc32.Castagnoli)))
		}
		l, err := DecodeLabel(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNoLabel) && !errors.Is(err, ErrLabelMismatch) {
				t.Fatalf("error of no label class: %v", err)
			}
			return
		}
		enc, err := EncodeLabel(l)
		if err != nil {
			t.Fatalf("decoded label %+v does not encode: %v", l, err)
		}
		for _, r := range [][2]int{{0, 12}, {16, 26 + len(l.ClusterID)}, {90, 92 + len(l.Namespace)}} {
			if !bytes.Equal(enc[r[0]:r[1]], b[r[0]:r[1]]) {
				t.Fatalf("label %+v encodes bytes %d..%d as %x, the input has %x", l, r[0], r[1], enc[r[0]:r[1]], b[r[0]:r[1]])
			}
		}
		if err := CheckLabel(b, l); err != nil {
			t.Fatalf("label %+v does not check against itself: %v", l, err)
		}
	})
}
