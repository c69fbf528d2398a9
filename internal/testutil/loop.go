//go:build linux

package testutil

import (
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// LoopAttach attaches file to a free loop device with direct IO, skipping
// t where no loop device can be had, and makes an empty directory to mount
// it on. It returns the directory, the device and undo, which unmounts the
// directory (lazily if it must) and detaches the device. Undo runs at
// cleanup too, even when the test fails; a second call does nothing.
func LoopAttach(t testing.TB, file string) (dir, loop string, undo func()) {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", "--direct-io=on", file).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device available here: %v: %s", err, out)
	}
	loop = strings.TrimSpace(string(out))
	dir = t.TempDir()
	var once sync.Once
	undo = func() {
		once.Do(func() {
			if err := syscall.Unmount(dir, 0); err != nil {
				syscall.Unmount(dir, syscall.MNT_DETACH)
			}
			exec.Command("losetup", "-d", loop).Run()
		})
	}
	t.Cleanup(undo)
	if strings.Contains(Exec(t, "losetup", "--list", "--noheadings", "-O", "DIO", loop), "0") {
		t.Errorf("%s: direct IO not enabled on the loop device", loop)
	}
	return dir, loop, undo
}

// UnmountRetry unmounts m (a FUSE mount), trying again while it is busy:
// a loop device detached from a file on it lets go of the file
// asynchronously.
func UnmountRetry(t testing.TB, m interface{ Unmount() error }) {
	t.Helper()
	logged := false
	WaitFor(t, "the unmount to succeed", func() bool {
		err := m.Unmount()
		if err != nil && !logged {
			t.Logf("unmount: %v (retrying)", err)
			logged = true
		}
		return err == nil
	})
}
