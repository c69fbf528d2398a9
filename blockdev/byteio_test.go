package blockdev_test

import (
	"bytes"
	"context"
	"math/rand"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// TestByteIOAgainstModel drives unaligned reads, writes and zeroing through
// ByteIO on a 4 KiB-block device and compares with a flat model.
func TestByteIOAgainstModel(t *testing.T) {
	ctx := context.Background()
	const size = 256 << 10
	mem, err := blockdev.NewMem(size, 4096)
	if err != nil {
		t.Fatal(err)
	}
	b := blockdev.NewByteIO(mem)
	model := make([]byte, size)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 500; i++ {
		off := int64(rng.Intn(size/512)) * 512
		n := min(int64(rng.Intn(64)+1)*512, size-off)
		switch rng.Intn(4) {
		case 0, 1:
			p := make([]byte, n)
			rng.Read(p)
			if err := b.WriteAt(ctx, p, off, i%7 == 0); err != nil {
				t.Fatal(err)
			}
			copy(model[off:], p)
		case 2:
			if err := b.Zero(ctx, off, n, i%2 == 0); err != nil {
				t.Fatal(err)
			}
			clear(model[off : off+n])
		case 3:
			got := make([]byte, n)
			if err := b.ReadAt(ctx, got, off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, model[off:off+n]) {
				t.Fatalf("op %d: read %d+%d differs from the model", i, off, n)
			}
		}
	}
}

// TestByteIOConcurrentPatches has goroutines write disjoint 512-byte pieces
// of the same 4 KiB blocks at once: no piece may be lost to another's
// read-modify-write.
func TestByteIOConcurrentPatches(t *testing.T) {
	ctx := context.Background()
	mem, _ := blockdev.NewMem(64<<10, 4096)
	b := blockdev.NewByteIO(mem)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for blk := int64(0); blk < 16; blk++ {
				p := bytes.Repeat([]byte{byte(w + 1)}, 512)
				if err := b.WriteAt(ctx, p, blk*4096+int64(w)*512, false); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got := make([]byte, 64<<10)
	mem.ReadAt(ctx, got, 0)
	for blk := 0; blk < 16; blk++ {
		for w := 0; w < 8; w++ {
			piece := got[blk*4096+w*512 : blk*4096+(w+1)*512]
			if !bytes.Equal(piece, bytes.Repeat([]byte{byte(w + 1)}, 512)) {
				t.Fatalf("block %d piece %d lost", blk, w)
			}
		}
	}
}
