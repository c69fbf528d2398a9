package volume

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestConformance runs the blockdev conformance suite on volumes of several
// layouts: a Volume is a Device like any other.
func TestConformance(t *testing.T) {
	for _, g := range []layout.Geometry{
		{K: 1, M: 0, Chunk: 4 << 10, SlotSize: 1 << 20},
		{K: 4, M: 2, Chunk: 64 << 10, SlotSize: 512 << 10},
		{K: 8, M: 3, Chunk: 16 << 10, SlotSize: 256 << 10},
		{K: 4, M: 2, Chunk: 64 << 10, SlotSize: 512 << 10, Checksums: true},
	} {
		t.Run(g.String(), func(t *testing.T) {
			devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
				return newRig(t, g, size, rigOptions{}).vol
			})
		})
	}
}

// TestConcurrentWriters has many goroutines write overlapping and disjoint
// ranges at once (run it with -race). Each goroutine owns a region and writes
// it repeatedly; overlapping writers share a region but write at whole-block
// granularity with their own tag, so every block must end holding one writer's
// last value for it, whole.
func TestConcurrentWriters(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 128 << 10}
	size := 4 * g.SegmentData()
	r := newRig(t, g, size, rigOptions{})
	ctx := context.Background()
	const writers = 16
	region := size / 8
	var wg sync.WaitGroup
	last := make([][]byte, size/4096) // per block: last write that hit it, per writer map below
	var mu sync.Mutex
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			base := int64(w/2) * region // writers 2i and 2i+1 overlap
			for i := 0; i < 40; i++ {
				n := int64(rng.Intn(12)+1) * 4096
				off := base + int64(rng.Int63n((region-n)/4096))*4096
				data := testutil.Pattern(int(n), byte(w*40+i))
				mu.Lock() // serialise against the overlapping writer for the model only
				if err := r.vol.WriteAt(ctx, data, off); err != nil {
					mu.Unlock()
					t.Error(err)
					return
				}
				for b := int64(0); b < n; b += 4096 {
					last[(off+b)/4096] = data[b : b+4096]
				}
				mu.Unlock()
				if i%5 == 0 {
					if err := r.vol.ReadAt(ctx, make([]byte, n), off); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	got := mustRead(t, r.vol, 0, int(size))
	for b, want := range last {
		if want == nil {
			want = make([]byte, 4096)
		}
		mustEqual(t, fmt.Sprintf("block %d", b), got[b*4096:(b+1)*4096], want)
	}
	r.checkParity(t)
}

// TestConcurrentStripeSharing has writers hit disjoint blocks of the same
// stripes at once: the read-modify-writes must not lose each other's parity
// updates.
func TestConcurrentStripeSharing(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10}
	size := g.SegmentData()
	r := newRig(t, g, size, rigOptions{})
	ctx := context.Background()
	blocks := size / 4096
	const writers = 8
	var wg sync.WaitGroup
	for w := int64(0); w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := w; b < blocks; b += writers {
				if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, byte(b)), b*4096); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	r.checkParity(t)
	// Lose two namespaces: everything must still reconstruct.
	r.devs[0].SetDown(true)
	r.devs[4].SetDown(true)
	got := mustRead(t, r.vol, 0, int(size))
	for b := int64(0); b < blocks; b++ {
		mustEqual(t, fmt.Sprintf("block %d", b), got[b*4096:(b+1)*4096], testutil.Pattern(4096, byte(b)))
	}
}

// TestConformanceSynchronous runs the conformance suite on a volume over
// plain in-memory namespaces, whose shard IO runs in line
// (blockdev.Synchronous) instead of fanned out.
func TestConformanceSynchronous(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 64 << 10, SlotSize: 512 << 10}
	devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
		dm, slots := DeviceMap{}, map[string]int64{}
		for i := 0; i < g.N(); i++ {
			m, err := blockdev.NewMem((g.Segments(size)+1)*g.SlotSize, 4096)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("m%d", i)
			dm[name], slots[name] = m, g.Segments(size)+1
		}
		v, err := New(Options{Geometry: g, Size: size, Devices: dm, Alloc: NewMemAllocator(g.N(), slots)})
		if err != nil {
			t.Fatal(err)
		}
		return v
	})
}
