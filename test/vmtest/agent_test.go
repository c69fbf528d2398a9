package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostTools returns the --file arguments that put each host program (an
// absolute path) and its shared libraries into the guest at the same
// paths, skipping the test when a program is missing here.
func hostTools(t *testing.T, progs ...string) []string {
	t.Helper()
	var files []string
	for _, p := range progs {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is not installed on this host, and the guest gets it from here: %v", p, err)
		}
		files = append(files, p+":"+p)
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", p, err)
		}
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line) // "libx.so.1 => /lib/x86_64-linux-gnu/libx.so.1 (0x7f...)"
			if len(f) >= 3 && f[1] == "=>" && filepath.IsAbs(f[2]) {
				real, err := filepath.EvalSymlinks(f[2])
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, real+":"+f[2])
			}
		}
	}
	return files
}

// TestAgentRestart: scenarios/agent-restart.sh over the guest's nbd driver,
// and over ublk with the module built for the guest kernel: `nvstripe
// agent` + `map --agent` with no frontend flag, ls, ext4, the agent killed
// -9 and started again while mounted, growth and resize2fs (nbd), a
// foreground map that exits once its device is disconnected (nbd), fio
// --verify=crc32c while a target is killed, unmap. The scenario fails on
// any wrong device, size, epoch, health, file or exit status.
func TestAgentRestart(t *testing.T) {
	vm := filepath.Dir(harness(t))
	files := append([]string{nvstripeFile(t)}, hostTools(t, "/usr/bin/fio", "/usr/sbin/resize2fs")...)
	t.Run("nbd", func(t *testing.T) {
		infos := runScenarioFor(t, 900*time.Second, "agent-restart.sh", files, "frontend=nbd")
		for _, w := range []string{"mapped dev=/dev/nbd0 size=67108864", "agent-restart reads-ok", "resized dev=/dev/nbd0 size=100663296",
			"detached rc=", "fio verify-ok", "ls-degraded /dev/nbd0", "unmapped dev=/dev/nbd0"} {
			if !containsPrefix(infos, w) {
				t.Errorf("no @@INFO line starting %q", w)
			}
		}
	})
	t.Run("ublk", func(t *testing.T) {
		ko := output(t, ".", nil, filepath.Join(vm, "build-ublk-module.sh"))
		infos := runScenarioFor(t, 900*time.Second, "agent-restart.sh", append(files, ko+":/lib/ublk_drv.ko"), "frontend=ublk")
		for _, w := range []string{"mapped dev=/dev/ublkb0 size=67108864", "agent-restart reads-ok", "fio verify-ok", "unmapped dev=/dev/ublkb0"} {
			if !containsPrefix(infos, w) {
				t.Errorf("no @@INFO line starting %q", w)
			}
		}
	})
}
