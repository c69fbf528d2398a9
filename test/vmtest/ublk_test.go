package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// output runs name with args in dir (env added) and returns its trimmed
// standard output, failing the test with its standard error.
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
// (/nvstripe), and runs every scenarios/ublk-*.sh in the guest. A scenario
// passes only when its script reaches its end (@@RESULT PASS); the console
// log names the failing step otherwise.
func TestUblkScenarios(t *testing.T) {
	vm := filepath.Dir(harness(t))
	scripts, _ := filepath.Glob("scenarios/ublk-*.sh")
	if len(scripts) == 0 {
		t.Fatal("no scenarios/ublk-*.sh")
	}
	ko := output(t, ".", nil, filepath.Join(vm, "build-ublk-module.sh"))
	bin := static(t, "test", "github.com/nvstripe/nvstripe/ublk")
	nvs := static(t, "github.com/nvstripe/nvstripe/cmd/nvstripe")
	for _, s := range scripts {
		name := strings.TrimSuffix(filepath.Base(s), ".sh")
		t.Run(name, func(t *testing.T) {
			runScenario(t, name+".sh", []string{ko + ":/lib/ublk_drv.ko", bin + ":/ublk.test", nvs + ":/nvstripe"})
		})
	}
}
