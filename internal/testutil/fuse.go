package testutil

import (
	"os"
	"strings"
	"testing"
)

// NeedFUSE skips t unless it runs as root with a /dev/fuse it can open:
// what a FUSE mount needs.
func NeedFUSE(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("FUSE mounts need root")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("FUSE mounts need /dev/fuse: %v", err)
	}
	f.Close()
}

// Mounted reports whether something is mounted at dir now, from
// /proc/self/mountinfo.
func Mounted(t testing.TB, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), " "+dir+" ")
}
