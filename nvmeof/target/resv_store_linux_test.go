package target

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// TestReservationStoreFullFileSystem: with the reservation file on a file
// system that a thin namespace file has filled, changes are still stored
// (the temporary file keeps its space between them) and read back.
func TestReservationStoreFullFileSystem(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mounting a small tmpfs needs root (CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	s := &resvStore{path: filepath.Join(dir, "d0.resv")}
	if _, err := s.load(); err != nil {
		t.Fatal(err)
	}
	s.reserve() // as the target does at start
	fill, err := os.Create(filepath.Join(dir, "d0.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer fill.Close()
	for {
		if _, err := fill.Write(make([]byte, 4096)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for gen := uint32(1); gen <= 3; gen++ {
		st := &resvState{Gen: gen}
		for i := range gen {
			st.Regs = append(st.Regs, registration{Host: hostID{byte(i + 1)}, Key: uint64(gen)})
		}
		if err := s.save(st); err != nil {
			t.Fatalf("save %d on a full file system: %v", gen, err)
		}
		got, err := s.load()
		if err != nil || !reflect.DeepEqual(got, st) {
			t.Fatalf("load after save %d: %+v, %v; want %+v", gen, got, err, st)
		}
	}
}
