package volclient

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// TestProcessBitFlipsHealed runs three `nvstripe target serve` processes
// with file namespaces under a checksummed 2+1 volume, flips bits in the
// files behind a data slot and a parity slot while the volume is mapped,
// and checks that an NBD client reads the written bytes, that the read
// healed the data block in the file, and that a scrub heals the parity
// block and a second scrub finds nothing.
func TestProcessBitFlipsHealed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs three target processes; not in -short")
	}
	pc := startProcCluster(t, 3)
	store, c, procs := pc.store, pc.c, pc.procs
	ctx := context.Background()
	const size = 8 << 20
	layout := meta.Layout{K: 2, M: 1, Chunk: 64 << 10, Checksum: meta.ChecksumCRC32C}
	if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size, Layout: layout}); err != nil {
		t.Fatal(err)
	}
	// No target fails here, so no timeout is under test: a minute each,
	// so that a stall of this process (go test -race on two loaded cores
	// starved it for over 8s) neither loses the lease (the owner closes
	// the volume: every read EIO) nor lets keep-alive misses take
	// namespaces out of use (a 2+1 stripe short of two shards: EIO).
	m, err := OpenVolume(ctx, store, "v", OpenOptions{Holder: "node1", LeaseTTL: time.Minute,
		Namespaces: NamespaceOptions{ControllerLossTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	defer explainFailure(t, m) // NBD's EIO does not carry the volume's error
	client := serveNBDClients(t, m.Volume, 1)[0]
	model := make([]byte, size)
	rand.New(rand.NewSource(5)).Read(model)
	if err := client.WriteAt(ctx, model, 0); err != nil {
		t.Fatal(err)
	}
	if err := client.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	g := layout.Geometry(c.SlotSize)
	// Stripe 1 of segment 0: shard 0 (data) in slot 1; stripe 2: shard 2
	// (parity) in slot 1 as well, 4 KiB into the chunk.
	dataFile, dataAt := slotFile(t, store, m, procs, 0, g.SlotOf(1, 0), 1*g.Chunk+8192)
	parFile, parAt := slotFile(t, store, m, procs, 0, g.SlotOf(2, 2), 2*g.Chunk+4096)
	want := flipFileBit(t, dataFile, dataAt)
	flipFileBit(t, parFile, parAt)

	verifyThrough(t, client, model, "after bit flips")
	if got := readFileBlock(t, dataFile, dataAt); string(got) != string(want) {
		t.Fatalf("%s at %d: the read did not heal the flipped data block", dataFile, dataAt)
	}
	if st := m.Volume.ChecksumStats(); st.Mismatches != 1 || st.Healed != 1 {
		t.Fatalf("after reading everything: %+v, want the data block found and healed", st)
	}
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- m.ServeTasks(sctx, store, TaskOptions{Holder: "node1", Interval: 50 * time.Millisecond})
	}()
	defer func() { stopServe(); <-served }() // before m.Close: no scrub outlives the volume
	// The bad parity block is also a parity chunk rewritten (Parity).
	if got := scrubTask(t, store, "node1"); got.Found != 1 || got.Healed != 1 || got.Parity != 1 || got.Done != g.Segments(size) {
		t.Fatalf("scrub task %+v, want the parity block found, healed and rewritten over every segment", got)
	}
	if st := m.Volume.ChecksumStats(); st.Mismatches != 2 || st.Healed != 2 || st.Unhealed != 0 {
		t.Fatalf("after a scrub: %+v, want the parity block found and healed too", st)
	}
	if got := scrubTask(t, store, "node1"); got.Found != 0 || got.Parity != 0 || got.State != meta.TaskDone {
		t.Fatalf("second scrub task %+v, want it done and finding nothing", got)
	}
	verifyThrough(t, client, model, "after the scrubs")
}

// explainFailure logs, when t has failed, what the volume knew: whether
// its owner lost the lease (it then closes the volume), the namespaces it
// treats as down and its checksum counters.
func explainFailure(t *testing.T, m *Mapped) {
	if !t.Failed() {
		return
	}
	t.Logf("owner: %v; namespaces down: %v; checksums: %+v", context.Cause(m.Owner.Context()), m.Volume.DownNamespaces(), m.Volume.ChecksumStats())
}

// putScrubTask records a running scrub task of volume v for holder and
// returns the record as the store reads it back.
func putScrubTask(t *testing.T, store *meta.Store, holder string) *meta.TaskRecord {
	t.Helper()
	ctx := context.Background()
	id := meta.ScrubTaskID("v")
	if err := store.PutTask(ctx, &meta.TaskRecord{ID: id, Kind: meta.TaskScrub, Volume: "v", Holder: holder, State: meta.TaskRunning}); err != nil {
		t.Fatal(err)
	}
	rec, err := store.Task(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// scrubTask records a scrub task of volume v for holder and waits until
// the owner has carried it out.
func scrubTask(t *testing.T, store *meta.Store, holder string) *meta.TaskRecord {
	t.Helper()
	ctx := context.Background()
	id := putScrubTask(t, store, holder).ID
	var rec *meta.TaskRecord
	waitUntil(t, "the scrub task done", func() bool {
		r, err := store.Task(ctx, id)
		rec = r
		return err == nil && r.State != meta.TaskRunning
	})
	if rec.State != meta.TaskDone || rec.Ended == "" {
		t.Fatalf("scrub task ended %+v", rec)
	}
	return rec
}

// slotFile returns the namespace file behind slot i of segment seg and the
// file offset of byte off of that slot.
func slotFile(t *testing.T, store *meta.Store, m *Mapped, procs []*procTarget, seg int64, i int, off int64) (string, int64) {
	t.Helper()
	ctx := context.Background()
	refs, ok, err := segmentMap{m.Map}.Lookup(ctx, seg)
	if err != nil || !ok {
		t.Fatalf("segment %d: %v %v", seg, ok, err)
	}
	ns, err := store.Namespace(ctx, refs[i].NS)
	if err != nil {
		t.Fatal(err)
	}
	var host int
	if _, err := fmt.Sscanf(ns.Host, "h%d", &host); err != nil {
		t.Fatal(err)
	}
	c, err := store.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(procs[host].dir, "d0.img"), refs[i].Slot*c.SlotSize + off
}

// flipFileBit flips the lowest bit of the byte at off in the file and
// returns the 4 KiB block around it as it was.
func flipFileBit(t *testing.T, name string, off int64) []byte {
	t.Helper()
	old := readFileBlock(t, name, off)
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{old[off%4096] ^ 1}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return old
}

func readFileBlock(t *testing.T, name string, off int64) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	at := off / 4096 * 4096
	return b[at : at+4096]
}
