package campaign

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// TestLeakCheck: the check passes on a cluster whose segments hold every
// used slot, and finds a used slot no segment references, a referenced
// slot that is free, and a task left running, but not a finished one.
func TestLeakCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := storetest.Open(t, meta.Config{Endpoints: metatest.Start(t)})
	const slot = 1 << 20
	storetest.Init(t, s, meta.InitOptions{SlotSize: slot})
	for h := range 3 {
		host := fmt.Sprintf("h%d", h)
		storetest.AddHost(t, s, nil, meta.NamespaceSpec{Host: host, NQN: "nqn.2026-12.io.nvstripe:" + host, NSID: 1, Size: 9 * slot,
			Paths: []meta.PathRecord{{Addr: "tcp://127.0.0.1:1"}}})
	}
	if _, err := s.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 4 * 2 * slot, Layout: meta.Layout{K: 2, M: 1, Chunk: 4096}}); err != nil {
		t.Fatal(err)
	}
	vm, err := s.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	slots, err := vm.Allocate(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaks(ctx, s, nil); err != nil {
		t.Fatalf("allocated segment: %v", err)
	}
	// A finished scrub's record stays: the controller schedules the next
	// scrub from its end time. It is no leak.
	if err := s.PutTask(ctx, &meta.TaskRecord{ID: "scrub-v", Kind: meta.TaskScrub, Volume: "v", Holder: "x", State: meta.TaskDone}); err != nil {
		t.Fatal(err)
	}
	if err := leaks(ctx, s, nil); err != nil {
		t.Fatalf("a finished scrub's record: %v", err)
	}
	refs, err := referenced(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	allocs := map[string]*meta.AllocRecord{}
	for _, r := range slots {
		if allocs[r.NS], err = s.Allocation(ctx, r.NS); err != nil {
			t.Fatal(err)
		}
	}
	delete(refs, slots[0])
	refs[meta.SlotRef{NS: slots[1].NS, Slot: 5}] = true
	got := strings.Join(compareSlots(allocs, refs), "; ")
	for _, want := range []string{fmt.Sprintf("%s/%d allocated, referenced by no segment", slots[0].NS, slots[0].Slot),
		fmt.Sprintf("%s/5 referenced but free", slots[1].NS)} {
		if !strings.Contains(got, want) {
			t.Errorf("compareSlots: %q, want %q in it", got, want)
		}
	}
	// A task that ends while the check waits is no leak: a move the
	// controller started after the round was judged healthy.
	mv := &meta.TaskRecord{ID: "mv-v-0", Kind: "move rebuild seg=0 shard=1 from=a to=b start=1", Volume: "v", Holder: "x", State: meta.TaskRunning}
	if err := s.PutTask(ctx, mv); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		mv.State = meta.TaskDone
		ended <- s.PutTask(ctx, mv)
	}()
	if err := leaks(ctx, s, nil); err != nil {
		t.Errorf("a move that ends while the check waits: %v", err)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	defer func(g time.Duration) { taskGrace = g }(taskGrace)
	taskGrace = time.Second
	if err := s.PutTask(ctx, &meta.TaskRecord{ID: "scrub-v", Kind: meta.TaskScrub, Volume: "v", Holder: "x", State: meta.TaskRunning}); err != nil {
		t.Fatal(err)
	}
	if err := leaks(ctx, s, nil); !errors.Is(err, errLeak) || !strings.Contains(err.Error(), "scrub-v") {
		t.Errorf("a task left running: %v", err)
	}
	// The campaign goes on after a failed round and reports a finding
	// once: the next round's check does not fail on it again.
	known := map[string]bool{}
	if err := leaks(ctx, s, known); !errors.Is(err, errLeak) || !known["task scrub-v (scrub) left running"] {
		t.Errorf("first report of the running task: %v, known %v", err, known)
	}
	if err := leaks(ctx, s, known); err != nil {
		t.Errorf("a finding reported before: %v", err)
	}
}

// serveRW serves dev as the read-write volume over NBD until the test ends
// and returns the address.
func serveRW(t *testing.T, dev blockdev.Device) string {
	t.Helper()
	srv, err := nbd.NewServer(nbd.Options{Exports: map[string]nbd.Export{rwVolume: {Device: dev}}})
	if err != nil {
		t.Fatal(err)
	}
	return testutil.ServeListener(t, srv.Serve)
}

// TestVerifyFindsLostWrite: verify passes when every block holds its
// acknowledged version (or a failed later write's), and fails on a block
// that holds neither, which it forgets (the next round checks the rest).
func TestVerifyFindsLostWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dev, err := blockdev.NewMem(volSize, blockSize)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveRW(t, dev)
	c, err := nbdtest.Dial(ctx, "tcp", addr, rwVolume)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := newWorkload(addr)
	for b, v := range map[int64]uint64{3: 7, 9: 8} {
		if err := c.WriteAt(ctx, content(b, v), b*blockSize); err != nil {
			t.Fatal(err)
		}
		w.record(b, v, true)
	}
	w.record(9, 11, false) // failed, never landed: 9 still holds 8
	w.record(3, 12, false)
	if err := c.WriteAt(ctx, content(3, 12), 3*blockSize); err != nil { // failed, but landed
		t.Fatal(err)
	}
	if n, err := w.verify(ctx, addr); n != 2 || err != nil {
		t.Fatalf("verify: %d blocks, %v; want 2, nil", n, err)
	}
	if w.acked[3] != 12 {
		t.Errorf("block 3 found holding the failed write 12, acknowledged %d", w.acked[3])
	}
	if err := c.WriteAt(ctx, content(9, 99), 9*blockSize); err != nil {
		t.Fatal(err)
	}
	if _, err := w.verify(ctx, addr); err == nil || !errors.Is(err, errLost) || !strings.Contains(err.Error(), "block 9") {
		t.Fatalf("verify of a block holding an unknown version: %v", err)
	}
	if n, err := w.verify(ctx, addr); n != 1 || err != nil {
		t.Fatalf("verify after the finding: %d blocks, %v; want block 3 alone, nil", n, err)
	}
}

// TestReaderFlagsWrongData: a failed read is only counted; a read that
// returns other bytes than the volume's content is a lost-data finding.
func TestReaderFlagsWrongData(t *testing.T) {
	r := &reader{}
	r.record(roChunk, roContent(roChunk, roChunk), nil)
	r.record(0, nil, errors.New("timeout"))
	if err := r.wrongRead(); err != nil || r.ok != 1 || r.failed != 1 {
		t.Fatalf("after a good and a failed read: %v, %d ok, %d failed", err, r.ok, r.failed)
	}
	bad := roContent(0, roChunk)
	bad[100] ^= 1
	r.record(0, bad, nil)
	if err := r.wrongRead(); !errors.Is(err, errLost) {
		t.Fatalf("a read of wrong data: %v", err)
	}
}

// TestVerifyUnsettledBlocks: a block of failed writes may read EIO once a
// write was refused with EIO (a round past what parity covers) and is then
// counted as unsettled, until it reads again; an acknowledged block that
// reads EIO, or a failed write's block when no write was refused, is
// reported as lost once and then forgotten (the next verify checks the
// rest, not the same block again).
func TestVerifyUnsettledBlocks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mem, err := blockdev.NewMem(volSize, blockSize)
	if err != nil {
		t.Fatal(err)
	}
	dev := faultdev.New(mem, 1)
	addr := serveRW(t, dev)
	eio := func(b int64) faultdev.RuleID {
		return dev.Add(faultdev.Rule{Ops: faultdev.OpRead, Off: b * blockSize, Len: blockSize, Err: blockdev.ErrCorrupt})
	}
	for _, b := range []int64{3, 5} {
		if err := mem.WriteAt(ctx, content(b, map[int64]uint64{3: 7, 5: 0}[b]), b*blockSize); err != nil {
			t.Fatal(err)
		}
	}
	r5 := eio(5)

	strict := newWorkload(addr) // no write refused: EIO is a loss
	strict.record(5, 8, false)
	if _, err := strict.verify(ctx, addr); !errors.Is(err, errLost) || !strings.Contains(err.Error(), "block 5") {
		t.Fatalf("verify of a failed write's block reading EIO with no write refused: %v", err)
	}
	if n, err := strict.verify(ctx, addr); n != 0 || err != nil {
		t.Fatalf("verify after the finding: %d blocks, %v; want 0 (forgotten), nil", n, err)
	}

	w := newWorkload(addr)
	w.record(3, 7, true)
	w.record(5, 8, false)
	w.refused = true
	if n, err := w.verify(ctx, addr); n != 2 || err != nil || w.unsettledBlocks() != 1 {
		t.Fatalf("verify after a refused write: %d blocks, %v, %d unsettled; want 2, nil, 1", n, err, w.unsettledBlocks())
	}
	r3 := eio(3)
	if _, err := w.verify(ctx, addr); !errors.Is(err, errLost) || !strings.Contains(err.Error(), "block 3") {
		t.Fatalf("verify of an acknowledged block reading EIO: %v", err)
	}
	if n, err := w.verify(ctx, addr); n != 1 || err != nil || w.unsettledBlocks() != 1 {
		t.Fatalf("verify after the finding: %d blocks, %v, %d unsettled; want block 5 alone, nil, 1", n, err, w.unsettledBlocks())
	}
	dev.Remove(r3)
	dev.Remove(r5)
	if n, err := w.verify(ctx, addr); n != 1 || err != nil || w.unsettledBlocks() != 0 {
		t.Fatalf("verify once the block reads: %d blocks, %v, %d unsettled; want 1, nil, 0", n, err, w.unsettledBlocks())
	}
}
