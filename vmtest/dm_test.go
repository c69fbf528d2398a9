package vmtest

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// dmFiles returns the --file arguments that put dmsetup (with its
// libraries) and the guest kernel's dm-mod, dm-flakey and dm-log-writes
// modules into the guest (/lib/dm/NAME.ko, loaded by lib/dm.sh's
// dm_load), skipping the test when the host lacks them. The kernel is the
// harness's: $VM_KVER, else the newest /lib/modules/VER with a
// /boot/vmlinuz-VER.
func dmFiles(t *testing.T) []string {
	t.Helper()
	files := hostTools(t, "/usr/sbin/dmsetup")
	kver := os.Getenv("VM_KVER")
	if kver == "" {
		dirs, _ := filepath.Glob("/lib/modules/*")
		sort.Strings(dirs)
		for _, d := range dirs {
			if _, err := os.Stat("/boot/vmlinuz-" + filepath.Base(d)); err == nil {
				kver = filepath.Base(d)
			}
		}
	}
	for _, m := range []string{"dm-mod", "dm-flakey", "dm-log-writes"} {
		ko := filepath.Join("/lib/modules", kver, "kernel/drivers/md", m+".ko")
		if _, err := os.Stat(ko); err != nil {
			t.Skipf("no uncompressed %s for the guest kernel %q: %v", m, kver, err)
		}
		files = append(files, ko+":/lib/dm/"+m+".ko")
	}
	return files
}

// TestDMFlakey: scenarios/dm-flakey.sh.
func TestDMFlakey(t *testing.T) {
	harness(t)
	files := append([]string{nvstripeFile(t)}, dmFiles(t)...)
	runScenarioFor(t, 600*time.Second, "dm-flakey.sh", files)
}

// TestDMLogWrites: scenarios/dm-log-writes.sh, with the replayer
// (vmtest/replay) built static for the guest.
func TestDMLogWrites(t *testing.T) {
	harness(t)
	files := append([]string{nvstripeFile(t), static(t, "./replay") + ":/bin/replay"}, dmFiles(t)...)
	infos := runScenarioFor(t, 600*time.Second, "dm-log-writes.sh", files)
	for _, w := range []string{"replayed m1 right-data", "replayed m3 right-data", "dm-log-writes replays=3"} {
		if !containsPrefix(infos, w) {
			t.Errorf("no @@INFO line starting %q", w)
		}
	}
}
