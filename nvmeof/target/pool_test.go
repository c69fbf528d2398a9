package target

import (
	"testing"
	"unsafe"
)

// TestPoolBuffersAligned: the data buffers the target reads into and
// writes from start on a 4 KiB boundary, so that a File namespace opened
// with O_DIRECT uses them as they are instead of copying through its
// bounce buffers.
func TestPoolBuffersAligned(t *testing.T) {
	var p bufPool
	for n := 512; n <= 16<<20; n *= 2 {
		for _, m := range []int{n, n - 512} {
			if m == 0 {
				continue
			}
			b := p.get(m)
			if a := uintptr(unsafe.Pointer(unsafe.SliceData(b))) % 4096; a != 0 {
				t.Errorf("get(%d): buffer at 4 KiB + %d", m, a)
			}
			p.put(b)
		}
	}
}
