package demo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tryExamples runs the commands of Examples (the ones `nvstripe demo
// --help` suggests) on the demo serving url, 8 MiB instead of 1 GiB: each
// must succeed, nbdcopy's progress must reach 100 %, and the volume must
// then start with the file's bytes.
func tryExamples(t *testing.T, url string) {
	t.Helper()
	for _, tool := range []string{"nbdinfo", "nbdcopy", "head", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Logf("%s not installed (nbdinfo and nbdcopy: Debian package libnbd-bin): skipping the help's examples", tool)
			return
		}
	}
	dir := t.TempDir()
	fill := filepath.Join(dir, "fill")
	for _, e := range Examples(url, "8M", fill) {
		cmd := exec.Command("sh", "-c", e.Command)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("example %q: %v\n%s", e.Command, err, stderr.String())
		}
		if strings.Contains(e.Command, "--progress") && !strings.Contains(stderr.String(), "100%") {
			t.Errorf("example %q: its progress never reached 100%%:\n%q", e.Command, stderr.String())
		}
	}
	want, err := os.ReadFile(fill)
	if err != nil || len(want) != 8<<20 {
		t.Fatalf("the example's source %s: %d bytes, %v", fill, len(want), err)
	}
	back := filepath.Join(dir, "back")
	if b, err := exec.Command("nbdcopy", url, back).CombinedOutput(); err != nil {
		t.Fatalf("nbdcopy out: %v\n%s", err, b)
	}
	got, err := os.ReadFile(back)
	if err != nil || !bytes.Equal(got[:len(want)], want) {
		t.Fatalf("the volume does not start with the example's data (%v)", err)
	}
}

// TestREADMEDemoExamples: README.md's quick start shows the same commands
// as `nvstripe demo --help`, for the default URL.
func TestREADMEDemoExamples(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range Examples(DefaultURL, "1G", "/tmp/fill") {
		if !bytes.Contains(readme, []byte(e.Command)) {
			t.Errorf("README.md lacks the demo example %q (demo.Examples): show the same commands as demo --help", e.Command)
		}
	}
}
