package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoServesAndShutsDown starts the demo as `nvstripe demo` does, waits for
// "ready", writes and reads data through NBD with nbdcopy, then stops it and
// checks that it shut down (Run returned, the NBD port is closed).
func TestDemoServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Dir: t.TempDir(), Size: 256 << 20, SlotSize: 16 << 20,
			NBDListen: "127.0.0.1:0", Out: &out, Stats: -1, Ready: func(u string) { ready <- u }})
	}()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		t.Fatalf("demo stopped before ready: %v\n%s", err, out.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("demo not ready after 2 minutes:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "ready: "+url) {
		t.Errorf("output lacks the ready line:\n%s", out.String())
	}
	copyThrough(t, url)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("demo did not shut down within a minute of being interrupted")
	}
	if nbdinfo, err := exec.LookPath("nbdinfo"); err == nil {
		if exec.Command(nbdinfo, url).Run() == nil {
			t.Error("NBD export still answers after shutdown")
		}
	}
}

// copyThrough writes 32 MiB of random data at the start of the export and
// reads it back with nbdcopy.
func copyThrough(t *testing.T, url string) {
	nbdcopy, err := exec.LookPath("nbdcopy")
	if err != nil {
		t.Log("nbdcopy not installed (Debian package libnbd-bin): skipping the data check")
		return
	}
	dir := t.TempDir()
	data := make([]byte, 32<<20)
	rand.Read(data)
	in, back := filepath.Join(dir, "in"), filepath.Join(dir, "back")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(nbdcopy, "--connections=4", in, url).CombinedOutput(); err != nil {
		t.Fatalf("nbdcopy in: %v\n%s", err, b)
	}
	if b, err := exec.Command(nbdcopy, "--connections=4", url, back).CombinedOutput(); err != nil {
		t.Fatalf("nbdcopy out: %v\n%s", err, b)
	}
	got, err := os.ReadFile(back)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 256<<20 || !bytes.Equal(got[:len(data)], data) || !bytes.Equal(got[len(data):], make([]byte, len(got)-len(data))) {
		t.Fatal("data read back through NBD differs from what was written")
	}
}
