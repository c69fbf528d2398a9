package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// harness returns the VM harness directory ($VM_DIR, else ../shared/vm
// relative to the repository root), skipping when it or QEMU is missing.
func harness(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: VM scenarios boot a kernel under emulation (minutes)")
	}
	dir := os.Getenv("VM_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "vm")
	}
	if _, err := os.Stat(filepath.Join(dir, "run-vm.sh")); err != nil {
		t.Skipf("no VM harness (set VM_DIR to the folder of run-vm.sh): %v", err)
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skipf("qemu-system-x86_64 not installed (the VM harness's setup-host.sh installs it): %v", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// runDir is where run-vm.sh keeps a run's console log: $VMTEST_RUN_DIR/NAME
// when set (kept for reading), else a temporary folder.
func runDir(t *testing.T, name string) string {
	if base := os.Getenv("VMTEST_RUN_DIR"); base != "" {
		d := filepath.Join(base, name)
		os.RemoveAll(d)
		return d
	}
	return filepath.Join(t.TempDir(), name)
}

func output(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, msg)
	}
	return strings.TrimSpace(string(out))
}

// TestUblkScenarios builds ublk_drv.ko for the guest kernel, a static test
// binary of package ublk (/ublk.test in the guest) and a static nvstripe
// (/nvstripe), and runs every scenarios/ublk-*.sh in the guest. A scenario passes only when its script reaches its end
// (@@RESULT PASS); the console log names the failing step otherwise.
func TestUblkScenarios(t *testing.T) {
	vm := harness(t)
	scripts, _ := filepath.Glob("scenarios/ublk-*.sh")
	if len(scripts) == 0 {
		t.Fatal("no scenarios/ublk-*.sh")
	}
	ko := output(t, ".", nil, filepath.Join(vm, "build-ublk-module.sh"))
	bin := filepath.Join(t.TempDir(), "ublk.test")
	output(t, "..", []string{"CGO_ENABLED=0"}, "go", "test", "-c", "-o", bin, "./ublk")
	nvs := filepath.Join(t.TempDir(), "nvstripe")
	output(t, "..", []string{"CGO_ENABLED=0"}, "go", "build", "-o", nvs, "./cmd/nvstripe")
	for _, s := range scripts {
		name := strings.TrimSuffix(filepath.Base(s), ".sh")
		t.Run(name, func(t *testing.T) {
			abs, _ := filepath.Abs(s)
			rd := runDir(t, name)
			cmd := exec.Command(filepath.Join(vm, "run-vm.sh"), "--run-dir", rd, "--timeout", "1200", "--quiet",
				"--file", ko+":/lib/ublk_drv.ko", "--file", bin+":/ublk.test", "--file", nvs+":/nvstripe", abs)
			out, err := cmd.CombinedOutput()
			if err != nil {
				log, _ := os.ReadFile(filepath.Join(rd, "console.log"))
				t.Fatalf("run-vm.sh %s: %v\n%s\nconsole tail:\n%s", name, err, out, tail(string(log), 60))
			}
			t.Logf("%s", out)
		})
	}
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}
