package agent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd"
)

func TestSpecOf(t *testing.T) {
	for _, c := range []struct {
		req  *api.MapRequest
		want Spec
		ok   bool
	}{
		{&api.MapRequest{Volume: "v", NbdListen: "127.0.0.1:10809"}, Spec{"v", ViaNBDListen, "127.0.0.1:10809", false}, true},
		{&api.MapRequest{Volume: "v", NbdListen: "unix:/run/v.sock", ReadOnly: true}, Spec{"v", ViaNBDListen, "unix:/run/v.sock", true}, true},
		{&api.MapRequest{Volume: "v", NbdDevice: "/dev/nbd3"}, Spec{"v", ViaNBDDevice, "/dev/nbd3", false}, true},
		{&api.MapRequest{Volume: "v", FuseDir: "/mnt/x"}, Spec{"v", ViaFUSE, "/mnt/x", false}, true},
		{&api.MapRequest{Volume: "v"}, Spec{}, false},
		{&api.MapRequest{Volume: "v", NbdListen: ":1", FuseDir: "/mnt"}, Spec{}, false},
		{&api.MapRequest{Volume: "", NbdListen: ":1"}, Spec{}, false},
		{&api.MapRequest{Volume: "a/b", NbdListen: ":1"}, Spec{}, false},
		{&api.MapRequest{Volume: "v", NbdListen: "10809"}, Spec{}, false},
		{&api.MapRequest{Volume: "v", NbdListen: "unix:rel.sock"}, Spec{}, false},
		{&api.MapRequest{Volume: "v", NbdDevice: "/dev/sda"}, Spec{}, false},
		{&api.MapRequest{Volume: "v", NbdDevice: "/dev/nbdx"}, Spec{}, false},
		{&api.MapRequest{Volume: "v", FuseDir: "mnt"}, Spec{}, false},
	} {
		got, err := SpecOf(c.req)
		if c.ok != (err == nil) || (c.ok && got != c.want) {
			t.Errorf("SpecOf(%+v) = %+v, %v", c.req, got, err)
		}
		if err != nil && !errors.Is(err, api.ErrInvalid) {
			t.Errorf("SpecOf(%+v): %v is not ErrInvalid", c.req, err)
		}
	}
}

func TestStateStore(t *testing.T) {
	dir := t.TempDir()
	s, err := openState(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := Spec{Volume: "a", Via: ViaNBDListen, Where: "127.0.0.1:1"}
	b := Spec{Volume: "b", Via: ViaFUSE, Where: "/mnt", ReadOnly: true}
	for _, sp := range []Spec{b, a, {Volume: "a", Via: ViaNBDListen, Where: "127.0.0.1:2"}} {
		if err := s.put(sp); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.remove("nosuch"); err != nil {
		t.Fatal(err)
	}
	// A record another version wrote, and garbage: reported, not dropped.
	err = s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte(mappingPrefix+"c"), []byte(`{"v":2,"volume":"c"}`)); err != nil {
			return err
		}
		return txn.Set([]byte(mappingPrefix+"d"), []byte(`{`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s, err = openState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	specs, bad, err := s.specs()
	a.Where = "127.0.0.1:2"
	if err != nil || len(specs) != 2 || specs[0] != a || specs[1] != b || len(bad) != 2 {
		t.Fatalf("specs after reopen: %+v, bad %v, %v", specs, bad, err)
	}
	if err := s.remove("a"); err != nil {
		t.Fatal(err)
	}
	if specs, _, _ := s.specs(); len(specs) != 1 || specs[0] != b {
		t.Errorf("after remove: %+v", specs)
	}
	if _, err := openState(dir); err == nil {
		t.Error("a second agent opened the same state directory")
	}
}

func TestStateStoreNone(t *testing.T) {
	s, err := openState("")
	if err != nil || s != nil {
		t.Fatalf("openState(\"\") = %v, %v", s, err)
	}
	if err := s.put(Spec{Volume: "v"}); err != nil {
		t.Fatal(err)
	}
	if specs, _, err := s.specs(); err != nil || specs != nil {
		t.Fatal(specs, err)
	}
}

func TestMeteredFence(t *testing.T) {
	ctx := context.Background()
	mem, err := blockdev.NewMem(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	d := newServed(mem, m, "v", nil)
	buf := make([]byte, 8192)
	if err := d.WriteAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.ReadAt(ctx, buf, 4096); err != nil {
		t.Fatal(err)
	}
	if err := d.ReadAt(ctx, buf, 1<<20); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
	if d.WriteBytes.Load() != 8192 || d.ReadBytes.Load() != 8192 || d.Reads.Load() != 2 || d.Errors.Load() != 1 {
		t.Errorf("counters: w %d r %d reads %d errors %d", d.WriteBytes.Load(), d.ReadBytes.Load(), d.Reads.Load(), d.Errors.Load())
	}
	d.fenceLost(meta.ErrLeaseLost)
	for name, call := range map[string]func() error{
		"read":  func() error { return d.ReadAt(ctx, buf, 0) },
		"write": func() error { return d.WriteAt(ctx, buf, 0) },
		"fua":   func() error { return d.WriteAtFUA(ctx, buf, 0) },
		"flush": func() error { return d.Flush(ctx) },
		"trim":  func() error { return d.Trim(ctx, 0, 4096) },
		"zero":  func() error { return d.WriteZeroes(ctx, 0, 4096) },
		"alloc": func() error { _, err := d.Allocated(ctx, 0, 4096); return err },
	} {
		if err := call(); !errors.Is(err, blockdev.ErrFenced) || !errors.Is(err, meta.ErrLeaseLost) {
			t.Errorf("%s after fence: %v", name, err)
		}
	}
	text := gather(t, m)
	for series, want := range map[string]float64{
		`nvstripe_agent_io_errors_total{op="write",volume="v"}`: 2, // write and fua after the fence
		`nvstripe_agent_io_ops_total{op="write",volume="v"}`:    3,
		`nvstripe_agent_io_bytes_total{op="write",volume="v"}`:  8192,
		`nvstripe_agent_io_errors_total{op="read",volume="v"}`:  2, // past the end, after the fence
	} {
		if v := metricValue(t, text, series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
	m.forget("v")
	if text := gather(t, m); strings.Contains(text, `volume="v"`) {
		t.Errorf("series of an unmapped volume remain:\n%s", text)
	}
}

func TestCheckSpecKernel(t *testing.T) {
	if kernelNBDPresent("/dev/nbd0") {
		t.Skip("the nbd driver is present here; this test checks the message where it is missing")
	}
	err := CheckSpec(Spec{Volume: "v", Via: ViaNBDDevice, Where: "/dev/nbd0"})
	if err == nil || err.Error() != "map v on /dev/nbd0: nbd kernel module not loaded (modprobe nbd); serve over --nbd-listen or --fuse instead" {
		t.Errorf("CheckSpec: %v", err)
	}
	if !kernelNBDPresent(filepath.Join(t.TempDir())) {
		t.Error("an existing device path is not taken as present")
	}
}

// The wrapper between a volume and its NBD/FUSE servers passes every
// capability through: its optimal IO size (the stripe), which the servers
// advertise to clients, whether it is synchronous, by which the NBD server
// runs requests in turn, FUA, zeroing and allocation.
func TestWrappersPassCapabilities(t *testing.T) {
	devtest.PassesCapabilities(t, func(d blockdev.Device) blockdev.Device {
		return newServed(d, NewMetrics(), "v", nil)
	}, true)
}

// TestNBDListenerCloseTwice: a listener whose Serve loop already ended (here
// on a closed server) closes, and closes again, without blocking: the
// second close of an unmap retried by Close used to wait forever for a
// value the first had taken.
func TestNBDListenerCloseTwice(t *testing.T) {
	srv, err := nbd.NewServer(nbd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // Serve returns ErrServerClosed at once
	f, err := listenNBD(srv, Spec{Volume: "v", Via: ViaNBDListen, Where: "127.0.0.1:0"}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- f.close(); done <- f.close() }()
	for i := range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("close %d: %v", i+1, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("close %d blocked", i+1)
		}
	}
}
