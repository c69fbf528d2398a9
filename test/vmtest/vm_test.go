package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// harness returns run-vm.sh, or skips saying what is missing.
func harness(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the VM harness runs an x86-64 Linux guest under QEMU on Linux hosts only")
	}
	if testing.Short() {
		t.Skip("-short: not booting a VM")
	}
	dir := os.Getenv("VM_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "vm") // beside the checkout
	}
	run, err := filepath.Abs(filepath.Join(dir, "run-vm.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(run); err != nil {
		t.Skipf("no VM harness at %s (set VM_DIR to its folder): %v", run, err)
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skipf("qemu-system-x86_64 not installed (run %s/setup-host.sh)", filepath.Dir(run))
	}
	if k, _ := filepath.Glob("/boot/vmlinuz-*"); len(k) == 0 {
		t.Skipf("no /boot/vmlinuz-* kernel for the guest (run %s/setup-host.sh)", filepath.Dir(run))
	}
	return run
}

// static builds a binary without cgo, as the busybox guest needs: go
// build (or go test -c, when args start with "test") of args, returning
// the file.
func static(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if args[0] == "test" {
		args = append([]string{"test", "-c", "-o", bin}, args[1:]...)
	} else {
		args = append([]string{"build", "-o", bin}, args...)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	return bin
}

// nvstripeFile is the --file argument that puts nvstripe in the guest.
func nvstripeFile(t *testing.T) string {
	return static(t, "github.com/nvstripe/nvstripe/cmd/nvstripe") + ":/bin/nvstripe"
}

// runScenario boots the guest on scenario with the given --file arguments
// (SRC:DEST) and params, and returns its @@INFO lines; a FAIL fails the test
// with the console's tail.
func runScenario(t *testing.T, scenario string, files []string, params ...string) []string {
	t.Helper()
	return runScenarioFor(t, 480*time.Second, scenario, files, params...)
}

// runScenarioFor is runScenario with the guest given timeout (the host
// waits a minute longer).
func runScenarioFor(t *testing.T, timeout time.Duration, scenario string, files []string, params ...string) []string {
	t.Helper()
	run := harness(t)
	script, err := filepath.Abs(filepath.Join("scenarios", scenario))
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	if base := os.Getenv("VM_RUN_DIR"); base != "" { // kept after the test, e.g. /tmp/NAME-vm
		runDir = filepath.Join(base, fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()))
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout+time.Minute)
	defer cancel()
	args := []string{"--quiet", "--run-dir", runDir, "--mem", "1536", "--timeout", fmt.Sprint(int(timeout.Seconds()))}
	for _, f := range append(scenarioLibs(t), files...) {
		args = append(args, "--file", f)
	}
	args = append(append(args, script), params...)
	cmd := exec.CommandContext(ctx, run, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	out, err := cmd.CombinedOutput()
	console, _ := os.ReadFile(filepath.Join(runDir, "console.log"))
	infos := grepPrefix(console, "@@INFO ")
	for _, l := range infos {
		t.Log(l)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s\nconsole tail:\n%s", scenario, strings.Join(params, " "), err, out, tail(console, 60))
	}
	return infos
}

// scenarioLibs returns the --file arguments that put every
// scenarios/lib/*.sh into the guest at /vm/scenarios/lib/, where the
// scenarios source them (run-vm.sh copies only the scenario itself).
func scenarioLibs(t *testing.T) []string {
	t.Helper()
	libs, err := filepath.Glob(filepath.Join("scenarios", "lib", "*.sh"))
	if err != nil || len(libs) == 0 {
		t.Fatalf("no scenarios/lib/*.sh (%v)", err)
	}
	var files []string
	for _, l := range libs {
		abs, err := filepath.Abs(l)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, abs+":/vm/scenarios/lib/"+filepath.Base(l))
	}
	return files
}

func grepPrefix(b []byte, prefix string) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), "\r"); strings.HasPrefix(l, prefix) {
			out = append(out, strings.TrimPrefix(l, prefix))
		}
	}
	return out
}

func tail(b []byte, n int) string {
	lines := strings.Split(string(b), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestNBDMap: `nvstripe map` on the guest kernel's nbd driver, end to end
// (scenarios/nbd-map.sh). The scenario fails (and so this test) on any
// wrong size, owner, queue count, file checksum, busy check or unmap.
func TestNBDMap(t *testing.T) {
	harness(t) // skip before building
	infos := runScenario(t, "nbd-map.sh", []string{nvstripeFile(t)})
	want := []string{"mapped dev=/dev/nbd0 size=67108864", "verified files=", "busy-refused", "unmapped size=0"}
	for _, w := range want {
		if !containsPrefix(infos, w) {
			t.Errorf("no @@INFO line starting %q", w)
		}
	}
}

// TestUnmapScenario: `nvstripe unmap` of foreground maps in the guest
// (scenarios/unmap.sh): a map started with flags before the verb on a
// kernel nbd device, unmapped by device and by volume, and an --nbd-listen
// map unmapped by volume; then "not mapped". The ublk subtest adds the same
// for `map --ublk` with the module built for the guest kernel.
func TestUnmapScenario(t *testing.T) {
	vm := filepath.Dir(harness(t))
	want := []string{"unmapped-by-/dev/nbd0 size=0", "unmapped-by-v size=0", "unmapped-listen url=nbd://", "not-mapped: "}
	t.Run("nbd", func(t *testing.T) {
		infos := runScenario(t, "unmap.sh", []string{nvstripeFile(t)})
		for _, w := range want {
			if !containsPrefix(infos, w) {
				t.Errorf("no @@INFO line starting %q", w)
			}
		}
	})
	t.Run("ublk", func(t *testing.T) {
		ko := output(t, ".", nil, filepath.Join(vm, "build-ublk-module.sh"))
		infos := runScenario(t, "unmap.sh", []string{nvstripeFile(t), ko + ":/lib/ublk_drv.ko"}, "ublk=1")
		for _, w := range append(want, "unmapped-ublk-by-/dev/ublkb0", "unmapped-ublk-by-v") {
			if !containsPrefix(infos, w) {
				t.Errorf("no @@INFO line starting %q", w)
			}
		}
	})
}

// TestNBDMapLong adds the map process killed -9 and restarted while reads
// wait (the new one takes the device over) and a target killed while
// mounted (NVSTRIPE_VM_LONG=1; about 4 minutes).
func TestNBDMapLong(t *testing.T) {
	if os.Getenv("NVSTRIPE_VM_LONG") != "1" {
		t.Skip("set NVSTRIPE_VM_LONG=1 to run the long nbd-map scenario (map restarted and a target killed while mounted)")
	}
	harness(t)
	infos := runScenario(t, "nbd-map.sh", []string{nvstripeFile(t)}, "long=1", "file_mb=32")
	for _, w := range []string{"restart reads-ok", "degraded reads ok", "unmapped size=0"} {
		if !containsPrefix(infos, w) {
			t.Errorf("no @@INFO line starting %q", w)
		}
	}
}

// TestNBDKernel runs the nbd package's kernel tests (TestKernel*, which
// skip elsewhere) as root in the guest: scenarios/nbd-kernel.sh.
func TestNBDKernel(t *testing.T) {
	harness(t)
	infos := runScenario(t, "nbd-kernel.sh", []string{static(t, "test", "github.com/nvstripe/nvstripe/nbd") + ":/bin/nbd.test"})
	if !containsPrefix(infos, "go-test --- PASS: TestKernelAttach") {
		t.Error("TestKernelAttach did not pass in the guest")
	}
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
