package volclient

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// TestProcessPausedReaderNeverReturnsForeignData is the attack on real
// processes: four `nvstripe target serve` processes, and a read-only
// `nvstripe map --read-only` process (a 2s lease) of volume v, read over
// NBD. The reader is stopped (SIGSTOP) and, while it is, 128 KiB reads of
// all of v are queued on its NBD socket. The controller's mover moves the
// shard of v's segment on one namespace away (it waits until the stopped
// reader's lease has expired), which releases the old slot; volume "other"
// is created, gets that slot and writes all of itself. Then the reader is
// resumed (SIGCONT): every queued read must return v's own bytes or an
// error, never the other volume's; and the mapping serves v's data again
// afterwards (it takes the volume again with the new placement).
//
// Each round moves another shard. Before reads were checked against the
// lease after they completed, 2 of 4 rounds returned foreign bytes.
// NVSTRIPE_READER_ROUNDS sets the number of rounds (default 3).
func TestProcessPausedReaderNeverReturnsForeignData(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs target and map processes; not in -short")
	}
	rounds := envInt(t, "NVSTRIPE_READER_ROUNDS", 3)
	pc := startProcCluster(t, 4)
	for r := range rounds {
		t.Run(fmt.Sprintf("round%d", r), func(t *testing.T) { pausedReaderRound(t, pc, r) })
	}
}

func pausedReaderRound(t *testing.T, pc *procCluster, r int) {
	ctx := context.Background()
	const slotSize = 4 << 20 // startProcClusterOn's
	vol, other := fmt.Sprintf("v%d", r), fmt.Sprintf("other%d", r)
	if _, err := pc.store.CreateVolume(ctx, meta.VolumeSpec{Name: vol, Size: 2 * slotSize,
		Layout: meta.Layout{K: 2, M: 1, Chunk: 64 << 10}}); err != nil { // format 1: no checksum stands in the way
		t.Fatal(err)
	}
	mine := bytes.Repeat([]byte{0x11 + byte(r)}, 2*slotSize)
	writeOnce(ctx, t, pc.store, vol, mine)
	etcd := strings.Join(pc.eps, ",")
	rd := startProcMap(t, pc.bin, etcd, vol, "reader", 2*time.Second, "--read-only")
	if n := differingMiB(t, rd.client, mine); n > 0 {
		t.Fatalf("the reader reads %d MiB wrong before anything happens", n)
	}
	vm, err := pc.store.VolumeMap(ctx, vol, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := vm.Segment(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := rec.Slots[r%3]

	if err := rd.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	const req = 128 << 10
	type result struct {
		off int64
		got []byte
		err error
	}
	results := make(chan result, len(mine)/req)
	var wg sync.WaitGroup
	for off := int64(0); off < int64(len(mine)); off += req {
		wg.Go(func() {
			got := make([]byte, req)
			err := rd.client.ReadAt(ctx, got, off)
			results <- result{off, got, err}
		})
	}
	t.Logf("reader stopped with %d reads of 128 KiB queued; moving %s/%d away", len(mine)/req, old.NS, old.Slot)

	mo := testOpenOptions("ctl")
	mo.Mover = true
	mv, err := OpenVolume(ctx, pc.store, vol, mo)
	if err != nil {
		t.Fatal(err)
	}
	if err := mv.MoveShard(ctx, 0, r%3, "", nil); err != nil {
		t.Fatalf("moving the shard away (the mover waits for the stopped reader's lease to expire): %v", err)
	}
	if err := mv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ow := fillFreedSlot(ctx, t, pc.store, other, slotSize, old)
	defer ow.Close(ctx)

	if err := rd.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	var ok, failed, foreign int
	var firstErr error
	for res := range results {
		switch {
		case res.err != nil:
			failed++
			firstErr = res.err
		case bytes.Equal(res.got, mine[res.off:res.off+req]):
			ok++
		default:
			foreign++
			i := firstDiff(res.got, mine[res.off:])
			t.Errorf("read %d+%d after SIGCONT returned bytes that are not the volume's (from %d on: %x...)", res.off, req, res.off+int64(i), res.got[i:min(i+8, req)])
		}
	}
	t.Logf("after SIGCONT: %d reads returned the volume's data, %d failed (first: %v), %d returned foreign bytes", ok, failed, firstErr, foreign)
	// The mapping takes the volume again and reads from the new placement.
	waitUntil(t, "the reader serving its data again", func() bool {
		got := make([]byte, req)
		for off := int64(0); off < int64(len(mine)); off += req {
			if err := rd.client.ReadAt(ctx, got, off); err != nil {
				return false
			}
			if !bytes.Equal(got, mine[off:off+req]) {
				t.Fatalf("the reader, serving again, reads foreign bytes at %d", off)
			}
		}
		return true
	})
}

// firstDiff returns the index of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}
