package initiator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// vmDir returns the kernel VM harness (VM_DIR, else the team's vm folder
// folder beside the checkout, as package vmtest looks) or skips the test
// saying what is missing.
func vmDir(t *testing.T) string {
	if testing.Short() {
		t.Skip("-short: the kernel VM scenario takes minutes")
	}
	dir := os.Getenv("VM_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "vm")
	}
	if _, err := os.Stat(filepath.Join(dir, "run-vm.sh")); err != nil {
		t.Skipf("no kernel VM harness (set VM_DIR to the folder with run-vm.sh): %v", err)
	}
	return dir
}

// startVMTarget starts a target for the VM on the first free port of
// VM_PORTS (default 21000-21099, this test's range).
func startVMTarget(t *testing.T, nqn string, dev blockdev.Device) (*target.Target, int) {
	lo, hi := 21000, 21099
	if s := os.Getenv("VM_PORTS"); s != "" {
		if _, err := fmt.Sscanf(s, "%d-%d", &lo, &hi); err != nil {
			t.Fatalf("VM_PORTS %q: want LO-HI", s)
		}
	}
	for port := lo; port <= hi; port++ {
		tgt, err := target.New(target.Config{
			Subsystems: []target.SubsystemConfig{{NQN: nqn, AllowAnyHost: true,
				Namespaces: []target.NamespaceConfig{{NSID: 1, Device: dev}}}},
			Listeners: []target.ListenerConfig{{Address: fmt.Sprintf("127.0.0.1:%d", port)}},
			Logf:      t.Logf,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := tgt.Start(context.Background()); err == nil {
			t.Cleanup(func() { tgt.Close() })
			return tgt, port
		}
	}
	t.Fatalf("no free port in %d-%d", lo, hi)
	return nil, 0
}

// TestLinuxHostReservationsVM runs test/vmtest/scenarios/resv-host.sh: the
// Linux 6.1 nvme-tcp host and nvme-cli register, report, get refused,
// preempt, write, release and unregister against this target, while this
// test holds a write-exclusive reservation under another host ID.
func TestLinuxHostReservationsVM(t *testing.T) {
	dir := vmDir(t)
	const nqn = "nqn.2024-01.io.nvstripe:resv-vm"
	mem, err := blockdev.NewMem(64<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tgt, port := startVMTarget(t, nqn, mem)
	ctx := context.Background()
	o := Options{HostNQN: testHost, HostID: [16]byte{0: 0x48, 15: 2}, SubsysNQN: nqn, Paths: tgt.Addrs(), IOQueues: 1}
	d := open(t, o)
	if err := d.TakeOver(ctx, 0xBEEF, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ReleaseReservation, pdu.ResvWriteExclusiveAllRegs, 0xBEEF); err != nil {
		t.Fatal(err)
	}
	if err := d.Acquire(ctx, AcquireOnly, pdu.ResvWriteExclusive, 0xBEEF, 0); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	if base := os.Getenv("VM_RUN_DIR"); base != "" {
		runDir = filepath.Join(base, fmt.Sprintf("resv-host-%d", os.Getpid()))
	}
	scenario, err := filepath.Abs("../../test/vmtest/scenarios/resv-host.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "run-vm.sh"), "--quiet", "--timeout", "540", "--run-dir", runDir,
		"--to-host", fmt.Sprintf("%d:4420", port), scenario, "nqn="+nqn, "port=4420", "hostkey=0xbeef")
	out, err := cmd.CombinedOutput()
	t.Logf("run-vm.sh (%s):\n%s", runDir, out)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(runDir, "console.log"))
		t.Fatalf("VM scenario: %v\nconsole:\n%s", err, log)
	}
	st, err := d.Report(ctx)
	if err != nil || st.Count != 0 || st.Type != pdu.ResvNone {
		t.Fatalf("after the guest unregistered: %+v, %v; want nothing registered", st, err)
	}
	if err := d.WriteAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatalf("write after the guest released: %v", err)
	}
	if err := d.Register(ctx, RegisterKey, 0, 0xBEEF, false); errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("re-register after the preempt: %v", err)
	}
}
