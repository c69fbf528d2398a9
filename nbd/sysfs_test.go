package nbd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDev writes /sys/block/nbdN as the kernel lays it out: size in 512-byte
// sectors always, pid and backend only while connected (pid < 0: none).
func fakeDev(t *testing.T, root string, index int, sectors int64, pid int, backend string) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprintf("nbd%d", index))
	mustf(t, os.MkdirAll(dir, 0o755), "mkdir")
	mustf(t, os.WriteFile(filepath.Join(dir, "size"), fmt.Appendf(nil, "%d\n", sectors), 0o644), "size")
	if pid >= 0 {
		mustf(t, os.WriteFile(filepath.Join(dir, "pid"), fmt.Appendf(nil, "%d\n", pid), 0o644), "pid")
	}
	if backend != "" {
		mustf(t, os.WriteFile(filepath.Join(dir, "backend"), []byte(backend+"\n"), 0o644), "backend")
	}
}

func TestReadDevices(t *testing.T) {
	root := t.TempDir()
	fakeDev(t, root, 10, 0, -1, "")
	fakeDev(t, root, 2, 131072, 4242, "vol")
	fakeDev(t, root, 0, 0, -1, "")
	mustf(t, os.MkdirAll(filepath.Join(root, "sda"), 0o755), "sda")
	mustf(t, os.MkdirAll(filepath.Join(root, "nbdx"), 0o755), "nbdx")
	ds, err := readDevices(root)
	mustf(t, err, "readDevices")
	got := fmt.Sprint(ds)
	want := "[{/dev/nbd0 0 0 0 } {/dev/nbd2 2 67108864 4242 vol} {/dev/nbd10 10 0 0 }]"
	if got != want {
		t.Fatalf("devices\n got %s\nwant %s", got, want)
	}
	if !ds[1].Connected() || ds[0].Connected() {
		t.Fatalf("Connected: %v %v", ds[0].Connected(), ds[1].Connected())
	}
}

func TestFreeDevice(t *testing.T) {
	root := t.TempDir()
	fakeDev(t, root, 0, 2048, 77, "a") // connected
	fakeDev(t, root, 1, 2048, -1, "")  // sized but not connected: still tearing down
	fakeDev(t, root, 2, 0, 78, "b")    // connected, size not yet set
	fakeDev(t, root, 3, 0, -1, "")
	fakeDev(t, root, 4, 0, -1, "")
	d, err := freeDevice(root, nil)
	if err != nil || d.Path != "/dev/nbd3" {
		t.Fatalf("free device %v, %v; want /dev/nbd3", d, err)
	}
	d, err = freeDevice(root, map[int]bool{3: true})
	if err != nil || d.Path != "/dev/nbd4" {
		t.Fatalf("free device skipping nbd3: %v, %v; want /dev/nbd4", d, err)
	}
	_, err = freeDevice(root, map[int]bool{3: true, 4: true})
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "nbds_max") {
		t.Fatalf("no free device: %v", err)
	}
}

func TestDeviceOf(t *testing.T) {
	root := t.TempDir()
	fakeDev(t, root, 0, 0, -1, "v") // stale backend, not connected
	fakeDev(t, root, 1, 2048, 5, "w")
	fakeDev(t, root, 2, 2048, 6, "v")
	d, err := deviceOf(root, "v")
	if err != nil || d.Path != "/dev/nbd2" || d.PID != 6 {
		t.Fatalf("deviceOf(v) = %v, %v; want /dev/nbd2 pid 6", d, err)
	}
	if _, err := deviceOf(root, "x"); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("deviceOf(x): %v", err)
	}
}

func TestReadDeviceErrors(t *testing.T) {
	root := t.TempDir()
	if _, err := readDevice(root, 9); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("missing device: %v", err)
	}
	fakeDev(t, root, 0, 0, -1, "")
	mustf(t, os.WriteFile(filepath.Join(root, "nbd0", "size"), []byte("lots\n"), 0o644), "size")
	if _, err := readDevice(root, 0); err == nil || !strings.Contains(err.Error(), `"lots"`) {
		t.Fatalf("garbage size: %v", err)
	}
	if _, err := readDevices(filepath.Join(root, "none")); err == nil {
		t.Fatal("missing sysfs accepted")
	}
}
