package devtest

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// CheckContent reads the first len(want) bytes of d and fails t unless
// every 4 KiB block holds what want holds there or, for a block whose
// offset undef lists (a failed write, which may have landed or not), one
// of the versions listed for it. when names the moment in the failures.
func CheckContent(t testing.TB, d blockdev.Device, want []byte, undef map[int64][][]byte, when string) {
	t.Helper()
	got := make([]byte, len(want))
	if err := d.ReadAt(context.Background(), got, 0); err != nil {
		t.Fatalf("%s: read: %v", when, err)
	}
	for b := int64(0); b < int64(len(want)); b += 4096 {
		blk := got[b : b+4096]
		if u, ok := undef[b]; ok {
			if !slices.ContainsFunc(u, func(w []byte) bool { return bytes.Equal(blk, w) }) {
				t.Fatalf("%s: block at %d of a failed write is none of the data written there", when, b)
			}
			continue
		}
		if !bytes.Equal(blk, want[b:b+4096]) {
			t.Fatalf("%s: block at %d differs from what was acknowledged", when, b)
		}
	}
}
