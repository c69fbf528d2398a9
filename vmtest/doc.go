// Package vmtest runs nvstripe against a real Linux kernel: its tests boot
// the team's QEMU harness (run-vm.sh, found at $VM_DIR or ../shared/vm
// beside the checkout) with a static nvstripe binary and a scenario from
// scenarios/, and skip with a message when the harness, QEMU or a kernel
// image is missing. The package has no code of its own.
//
// Scenarios (busybox sh, run in the guest; see each file's header):
//
//   - nbd-map.sh: a whole cluster in the guest, `nvstripe map VOL` on a
//     kernel nbd device with two connections, ext4 written, remounted and
//     verified, a second map of the busy device refused, the map process
//     killed and restarted while reads wait, unmap back to size 0.
//     TestNBDMap runs it (about a minute under emulation); with
//     NVSTRIPE_VM_LONG=1 also the long variant, which kills a target too.
//   - nbd-kernel.sh: the nbd package's TestKernel* tests, built static and
//     run as root in the guest (TestNBDKernel): attach with two
//     connections, a busy device refused, a dropped connection replaced,
//     close back to size 0.
package vmtest
