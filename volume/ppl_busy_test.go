package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
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
				p := testutil.Pattern(int(n), byte(i+w))
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

// TestWriteLogFullNoWait: a writer alone that finds its ring full of
// records no flush has covered flushes and writes at once; it waits (for
// writes in flight) only when the flush did not free the ring. It slept
// a millisecond after every such flush: a 4 KiB write at QD1 took a third
// longer on average with the log (in the fake clock of synctest, time
// moved on).
func TestWriteLogFullNoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := layout.Geometry{K: 2, M: 1, Chunk: 128 << 10, SlotSize: 16 << 20, Checksums: true, Log: true}
		v := newRig(t, g, 16<<20, rigOptions{}).vol
		records := v.log.blocks / 2 // a 4 KiB write's record: a header and a partial-parity block
		start := time.Now()
		p := testutil.Pattern(4096, 1)
		for i := range 10 * records {
			if err := v.WriteAt(ctx, p, (i%64)*g.Chunk); err != nil {
				t.Fatal(err)
			}
		}
		if got := mustRead(t, v, 63*g.Chunk, 4096); !bytes.Equal(got, p) {
			t.Fatal("the last write reads other bytes")
		}
		if v.log.flushBegun.Load() == 0 {
			t.Fatalf("%d writes never found a ring full", 10*records)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("%d writes filling rings %d times took %v of the fake clock, want none", 10*records, v.log.flushBegun.Load(), d)
		}
		v.Close() // its shard IO workers exit: the bubble's clock stops with this goroutine
	})
}

// TestAwaitEnd: a writer that finds a ring full up to a record of a
// write in flight waits for that write to end (woken by it, not by the
// bound on the wait: no fake time passes), goes on at once when it has
// ended already, and gives up when its context is done.
func TestAwaitEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newWriteMark()
		busy := error(&ringBusy{mark: m})
		if !errors.Is(busy, errLogFull) {
			t.Fatal("a ring full of records in flight is not errLogFull")
		}
		start := time.Now()
		go func() {
			time.Sleep(time.Millisecond)
			m.end(7)
		}()
		if err := awaitEnd(context.Background(), fmt.Errorf("wrapped: %w", busy)); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != time.Millisecond {
			t.Fatalf("woke after %v of the fake clock, want the write's end at 1ms", d)
		}
		if m.Load() != 7 || m.wait() != nil {
			t.Fatalf("mark %d after the end; wait after it must not block", m.Load())
		}
		m.end(8) // a second end closes nothing twice
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := awaitEnd(ctx, &ringBusy{mark: newWriteMark()}); !errors.Is(err, context.Canceled) {
			t.Fatalf("awaitEnd with a cancelled context: %v", err)
		}
	})
}
