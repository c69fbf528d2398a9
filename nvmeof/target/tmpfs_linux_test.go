package target

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// TestTmpfsNamespaceIO: a file namespace on tmpfs, which blockdev.File
// reads and writes through a memory mapping and lends to reads over
// smallData (their C2HData goes to the socket from the file's pages),
// returns what was written: 128 KiB in-capsule and through R2Ts, 4 KiB,
// with and without a data digest (no lending), holes as zeros. Every
// lent range is given back: the device closes after the target.
func TestTmpfsNamespaceIO(t *testing.T) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != 0x01021994 {
		t.Skip("needs /dev/shm on tmpfs")
	}
	dir, err := os.MkdirTemp("/dev/shm", "nvstripe-target-")
	if err != nil {
		t.Skipf("needs a writable /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dev, err := blockdev.OpenFile(filepath.Join(dir, "ns.img"), &blockdev.FileOptions{Size: nsSize, Sparse: true})
	if err != nil {
		t.Fatal(err)
	}
	if !dev.Mapped() {
		t.Fatal("a file on tmpfs is not mapped")
	}
	f := newFixture(t, 1, func(c *Config) { c.Subsystems[0].Namespaces[0].Device = dev })
	addr := f.t.Addr(0)
	a := dial(t, addr, pdu.Digests{})
	cntlid := a.adminUp(0)
	const nlb = 32 // 128 KiB
	for qid, dg := range []pdu.Digests{{}, {Header: true, Data: true}} {
		h := ioUp(t, addr, dg, uint16(qid+1), cntlid, 0)
		for i, inCapsule := range []bool{true, false} {
			slba := uint64(qid*2+i) * nlb
			want := bytes.Repeat([]byte{byte(qid*2 + i + 1)}, nlb*nsBS)
			mustOK(t, "write", h.do(rwSQE(pdu.IOWrite, 1, slba, nlb, inCapsule), want, nil))
			got := make([]byte, len(want))
			mustOK(t, "read 128 KiB", h.do(rwSQE(pdu.IORead, 1, slba, nlb, false), nil, got))
			if !bytes.Equal(got, want) {
				t.Fatalf("digests %+v, in-capsule %v: 128 KiB read back differs", dg, inCapsule)
			}
			small := make([]byte, nsBS)
			mustOK(t, "read 4 KiB", h.do(rwSQE(pdu.IORead, 1, slba+3, 1, false), nil, small))
			if !bytes.Equal(small, want[:nsBS]) {
				t.Fatalf("digests %+v: 4 KiB read back differs", dg)
			}
		}
		hole := make([]byte, nlb*nsBS)
		hole[0] = 1
		mustOK(t, "read a hole", h.do(rwSQE(pdu.IORead, 1, 16*nlb, nlb, false), nil, hole))
		if !bytes.Equal(hole, make([]byte, len(hole))) {
			t.Fatal("a hole does not read as zeros")
		}
	}
	if err := f.t.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil { // waits for every lent range
		t.Fatal(err)
	}
}
