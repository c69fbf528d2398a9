package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	mrand "math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// startDemo runs the demo with o, in a directory of t's, serving NBD on a
// free loopback port, until ctx ends. It returns the demo's output, the
// NBD URL once the demo is ready, and the channel Run's result comes on.
func startDemo(ctx context.Context, t *testing.T, o Options) (*testutil.Buffer, string, chan error) {
	t.Helper()
	out := &testutil.Buffer{}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	o.Dir, o.NBDListen, o.Out, o.Stats = t.TempDir(), "127.0.0.1:0", out, -1
	o.Ready = func(u string) { ready <- u }
	go func() { done <- Run(ctx, o) }()
	select {
	case url := <-ready:
		return out, url, done
	case err := <-done:
		t.Fatalf("demo stopped before ready: %v\n%s", err, out.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("demo not ready after 2 minutes:\n%s", out.String())
	}
	return nil, "", nil
}

// TestDemoServesAndShutsDown starts the demo as `nvstripe demo` does, waits for
// "ready", writes and reads data through NBD with nbdcopy, then stops it and
// checks that it shut down (Run returned, the NBD port is closed).
func TestDemoServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, url, done := startDemo(ctx, t, Options{Size: 256 << 20, SlotSize: 16 << 20})
	if !strings.Contains(out.String(), "ready: "+url) {
		t.Errorf("output lacks the ready line:\n%s", out.String())
	}
	copyThrough(t, url)
	tryExamples(t, url)
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

// TestDemoChaosThroughController runs `nvstripe demo --chaos` with six
// targets asked for (the demo must add a seventh, a spare host for a 4+2
// rebuild) and waits for the chaos run to end: the in-process controller must
// have noticed the stopped target and marked its namespace down, then out
// (nothing forced), the rebuild must have run through task records with
// progress shown, redundancy must be reported restored, and the test data
// must read back through NBD (package nbdtest) identical to what the demo
// wrote.
func TestDemoChaosThroughController(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a controller, seven targets and a rebuild; not in -short")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const size = 128 << 20
	out, url, done := startDemo(ctx, t, Options{Targets: 6, Chaos: true, Size: size, SlotSize: 8 << 20})
	for deadline := time.Now().Add(5 * time.Minute); !strings.Contains(out.String(), "chaos: redundancy restored"); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("demo ended during chaos: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) { // a hang guard, not a timing claim
			t.Fatalf("chaos not over after 5 minutes:\n%s", out.String())
		}
	}
	text := out.String()
	for _, want := range []string{
		"starting 7", "target 7:", "controller: in-process", "chaos: stopped target",
		"read 64 MiB back while degraded: identical",
		"in -> down", "out (", "by owner demo.", "rebuild: [####################]",
		"data verified",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(text, "by the controller") {
		t.Errorf("the controller moved shards itself; the demo's mapping owns the volume and should have")
	}
	checkChaosData(t, url)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("demo: %v", err)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("demo output:\n%s", text)
	}
}

// checkChaosData reads the chaos test data (64 MiB from seed 1) back through
// NBD.
func checkChaosData(t *testing.T, url string) {
	t.Helper()
	hostPort, export, _ := strings.Cut(strings.TrimPrefix(url, "nbd://"), "/")
	c, err := nbdtest.Dial(t.Context(), "tcp", hostPort, export)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]byte, 64<<20)
	mrand.New(mrand.NewSource(1)).Read(want)
	got := make([]byte, 4<<20)
	for off := 0; off < len(want); off += len(got) {
		if err := c.ReadAt(t.Context(), got, int64(off)); err != nil {
			t.Fatalf("read through NBD at %d: %v", off, err)
		}
		if !bytes.Equal(got, want[off:off+len(got)]) {
			t.Fatalf("chaos data at %d differs when read through NBD after the rebuild", off)
		}
	}
}
