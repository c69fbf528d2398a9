package volclient

import (
	"context"
	"errors"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// TestProcessNoSpace runs three `nvstripe target serve` processes under a
// 2+1 volume; two of them keep their sparse namespace files on a small
// tmpfs. The volume is filled part way and flushed, then written on until
// both tmpfs mounts are full. Writes that cannot be done fail with
// ErrNoSpace (ENOSPC over NBD), no namespace is taken for down, and every
// acknowledged byte reads back, flushed or not, from this owner and from a
// new one while the file systems are still full. Once they have space
// again, the mapping repairs what the writes missed by itself (every stale
// mark is gone), the rest of the volume takes writes, and it maps again.
func TestProcessNoSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs three target processes; not in -short")
	}
	small := []string{mountTmpfs(t, "20m"), mountTmpfs(t, "20m")}
	bin := buildNvstripe(t)
	pc := &procCluster{bin: bin, eps: metatest.Start(t)}
	pc.store = storetest.Open(t, meta.Config{Endpoints: pc.eps})
	pc.c = storetest.Init(t, pc.store, meta.InitOptions{SlotSize: 4 << 20})
	ctx := context.Background()
	for i, dir := range []string{small[0], small[1], t.TempDir()} {
		pc.procs = append(pc.procs, startProcTargetIn(t, bin, pc.store, pc.c, i, dir))
	}
	const size = 64 << 20
	lay := meta.Layout{K: 2, M: 1, Chunk: 64 << 10}
	if _, err := pc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size, Layout: lay}); err != nil {
		t.Fatal(err)
	}
	open := func(what string) *Mapped {
		t.Helper()
		m, err := OpenVolume(ctx, pc.store, "v", OpenOptions{Holder: "node1", LeaseTTL: time.Minute,
			RecheckInterval: 200 * time.Millisecond, Namespaces: NamespaceOptions{ControllerLossTimeout: time.Minute}})
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		return m
	}
	m := open("first owner")
	defer func() { m.Close(ctx) }()

	model := make([]byte, size)
	rand.New(rand.NewSource(3)).Read(model)
	const flushed = 16 << 20 // 4 MiB of data and parity in each of 2 slots per namespace
	if err := m.Volume.WriteAt(ctx, model[:flushed], 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Volume.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	undef := map[int64][][]byte{} // 4 KiB blocks of failed writes: what each may read as
	failed := 0
	for off := int64(flushed); off < size; off += 1 << 20 {
		p := model[off : off+1<<20]
		err := m.Volume.WriteAt(ctx, p, off)
		if err == nil {
			continue
		}
		if !errors.Is(err, blockdev.ErrNoSpace) {
			t.Fatalf("write at %d with the file systems filling: %v (class %v), want ErrNoSpace", off, err, blockdev.Class(err))
		}
		failed++
		for b := off; b < off+int64(len(p)); b += 4096 {
			undef[b] = [][]byte{make([]byte, 4096), model[b : b+4096]} // never written before: zeros
		}
	}
	if failed == 0 {
		t.Fatal("no write failed: the tmpfs mounts never filled")
	}
	t.Logf("%d of %d 1 MiB writes failed for lack of space", failed, (size-flushed)>>20)
	if err := m.Volume.Flush(ctx); err != nil {
		t.Fatalf("flush with full file systems: %v", err)
	}
	if down := m.Volume.DownNamespaces(); len(down) != 0 {
		t.Fatalf("namespaces taken for down for lack of space: %v", down)
	}
	devtest.CheckContent(t, m.Volume, model, undef, "with full file systems")
	client := serveNBDClients(t, m.Volume, 1)[0]
	var ne *nbdtest.Error
	if err := client.WriteAt(ctx, make([]byte, 1<<20), size-(1<<20)); !errors.As(err, &ne) || ne.Errno != proto.ENOSPC {
		t.Fatalf("NBD write into the full part: %v, want ENOSPC", err)
	}
	for b := int64(size - 1<<20); b < size; b += 4096 {
		undef[b] = append(undef[b], make([]byte, 4096))
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	m = open("a new owner, file systems still full")
	devtest.CheckContent(t, m.Volume, model, undef, "a new owner, file systems still full")

	// Space comes back under the mapping: its upkeep repairs the stripes
	// the failed writes missed, and the rest of the volume takes writes.
	for _, dir := range small {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=128m"); err != nil {
			t.Fatalf("growing the tmpfs at %s: %v", dir, err)
		}
	}
	waitUntil(t, "the mapping's upkeep to repair and clear every stale mark", func() bool {
		marks, err := m.Map.Stale(ctx)
		return err == nil && len(marks) == 0 && !m.Volume.HasHoles()
	})
	devtest.CheckContent(t, m.Volume, model, undef, "space is back")
	if err := m.Volume.WriteAt(ctx, model[flushed:], flushed); err != nil {
		t.Fatalf("writing the rest once space is back: %v", err)
	}
	if err := m.Volume.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m = open("mapped again")
	devtest.CheckContent(t, m.Volume, model, nil, "mapped again, after writing everything")
}

// mountTmpfs mounts a tmpfs of the given size on a temporary directory and
// unmounts it when the test ends (after the processes using it, which are
// started later, are stopped).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mounting a tmpfs needs root (CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
