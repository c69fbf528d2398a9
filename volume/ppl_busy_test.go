package volume

import (
	"bytes"
	"context"
	"math/rand"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestWriteLogManyWriters: more writers in flight than a slot's log ring
// holds records (a kernel nbd device's queues over a 16 MiB slot) all
// succeed and read back: a writer that finds the ring full flushes and
// waits for the writes in flight, it does not fail (it did after three
// flushes: EIO to ext4 in the nbd-map VM scenario).
func TestWriteLogManyWriters(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, Chunk: 128 << 10, SlotSize: 16 << 20, Checksums: true, Log: true}
	const writers = 64
	size := int64(32 << 20)
	region := size / writers
	v := newRig(t, g, size, rigOptions{}).vol
	want := make([][]byte, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		want[w] = make([]byte, region)
		wg.Go(func() {
			rng := rand.New(rand.NewSource(int64(w)))
			for i := range 100 {
				n := int64(1+rng.Intn(16)) * 4096
				off := rng.Int63n((region-n)/4096+1) * 4096
				p := pattern(int(n), byte(i+w))
				write := v.WriteAt
				if i%8 == 0 {
					write = v.WriteAtFUA
				}
				if err := write(ctx, p, int64(w)*region+off); err != nil {
					errs <- err
					return
				}
				copy(want[w][off:], p)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		if got := mustRead(t, v, int64(w)*region, int(region)); !bytes.Equal(got, want[w]) {
			t.Fatalf("writer %d's region reads other bytes", w)
		}
	}
}
