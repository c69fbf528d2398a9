package volclient

import (
	"context"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// TestProcessBoundDamageRebuilt runs six `nvstripe target serve` processes
// with file namespaces under a 4+2 volume of format 4 (checksums bound to
// their place), writes it, unmaps it, and behind the targets truncates
// and re-extends the file behind a slot of segment 1 (zeros from the
// middle of the slot on, checksums and log included) and swaps two slots
// of segment 0 between two files (each with its own checksum area). Once
// mapped again every read returns the written bytes, a scrub finds and
// heals every damaged block and a second scrub finds nothing. With the
// checksums of format 3 the reads return the zeros and the swapped blocks,
// and the scrub rewrites parity to match them.
func TestProcessBoundDamageRebuilt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs six target processes; not in -short")
	}
	pc := startProcCluster(t, 6)
	store, c, procs := pc.store, pc.c, pc.procs
	ctx := context.Background()
	layout := meta.Layout{K: 4, M: 2, Chunk: 64 << 10, Checksum: meta.ChecksumCRC32C, WriteLog: meta.WriteLogPPL}
	g := layout.Geometry(c.SlotSize)
	size := 2 * g.SegmentData()
	if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size, Layout: layout, BindChecksums: true}); err != nil {
		t.Fatal(err)
	}
	model := make([]byte, size)
	rand.New(rand.NewSource(7)).Read(model)
	m := openBound(t, store)
	client := serveNBDClients(t, m.Volume, 1)[0]
	if err := client.WriteAt(ctx, model, 0); err != nil {
		t.Fatal(err)
	}
	if err := client.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	holeFile, holeAt := slotFile(t, store, m, procs, 1, 2, c.SlotSize/3/4096*4096)
	aFile, aAt := slotFile(t, store, m, procs, 0, 0, 0)
	bFile, bAt := slotFile(t, store, m, procs, 0, 3, 0)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	truncateReextend(t, holeFile, holeAt)
	swapFileRanges(t, aFile, aAt, bFile, bAt, c.SlotSize)

	m = openBound(t, store)
	defer m.Close(ctx)
	defer explainFailure(t, m)
	client = serveNBDClients(t, m.Volume, 1)[0]
	verifyThrough(t, client, model, "after a hole and a swap")
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- m.ServeTasks(sctx, store, TaskOptions{Holder: "node1", Interval: 50 * time.Millisecond})
	}()
	defer func() { stopServe(); <-served }() // before m.Close: no scrub outlives the volume
	if got := scrubTask(t, store, "node1"); got.Found == 0 || got.Healed != got.Found || got.Done != g.Segments(size) {
		t.Fatalf("scrub task %+v, want the damaged blocks the reads left (parity) found and healed", got)
	}
	if got := scrubTask(t, store, "node1"); got.Found != 0 || got.Parity != 0 || got.State != meta.TaskDone {
		t.Fatalf("second scrub task %+v, want it done and finding nothing", got)
	}
	if st := m.Volume.ChecksumStats(); st.Unhealed != 0 || st.Torn != 0 {
		t.Fatalf("checksum counters %+v, want nothing unhealed or kept as torn", st)
	}
	verifyThrough(t, client, model, "after the scrubs")
}

// openBound maps volume v as holder node1 (timeouts as in
// TestProcessBitFlipsHealed: a minute, so a starved test process keeps
// its lease and namespaces).
func openBound(t *testing.T, store *meta.Store) *Mapped {
	t.Helper()
	m, err := OpenVolume(context.Background(), store, "v", OpenOptions{Holder: "node1", LeaseTTL: time.Minute,
		Namespaces: NamespaceOptions{ControllerLossTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// truncateReextend cuts the file at off and extends it back to its size:
// zeros from off on, as a shard file truncated and grown again.
func truncateReextend(t *testing.T, name string, off int64) {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(name, off); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(name, fi.Size()); err != nil {
		t.Fatal(err)
	}
}

// swapFileRanges swaps n bytes at aOff of file a with n bytes at bOff of
// file b, durably.
func swapFileRanges(t *testing.T, a string, aOff int64, b string, bOff, n int64) {
	t.Helper()
	read := func(name string, off int64) []byte {
		buf := make([]byte, n)
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	write := func(name string, buf []byte, off int64) {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	ba, bb := read(a, aOff), read(b, bOff)
	write(a, bb, aOff)
	write(b, ba, bOff)
}
