// Package vmtest runs nvstripe against a real Linux kernel: its tests boot
// the team's QEMU harness (run-vm.sh, found at $VM_DIR or in the team's
// harness folder beside the checkout, see vm_test.go) with a static nvstripe binary and a scenario from
// scenarios/, and skip with a message when the harness, QEMU or a kernel
// image is missing (or with -short). VM_RUN_DIR keeps the run folders
// (console.log) under that folder. The package has no code of its own.
//
// Scenarios (busybox sh, run in the guest; see each file's header). The
// steps several share (a whole cluster: cluster_up; ublk_drv loaded:
// ublk_load; files written and summed: fill_files) live in
// scenarios/lib/nvstripe.sh, which runScenario ships into the guest. A
// scenario that sources it also prints each step's duration (@@INFO
// step-s SECONDS STEP, logged by the test), and at its end the agent's log
// and the kernel's nbd/ublk lines; watch_stuck DEV names the kernel's
// requests on DEV that stay in flight over 15 s while they hang:
//
//   - nbd-map.sh: a whole cluster in the guest, `nvstripe map VOL` on a
//     kernel nbd device with four connections, ext4 written, remounted and
//     verified, a second map of the busy device refused, unmap back to size
//     0: TestNBDMap (about 1.5 minutes under emulation). With
//     NVSTRIPE_VM_LONG=1, TestNBDMapLong runs it with long=1: the map
//     process killed and restarted while reads wait (taken over), and a
//     target killed while mounted (about 4 minutes).
//   - unmap.sh: a whole cluster in the guest, a foreground map started
//     with flags before the verb on /dev/nbd0 unmapped by `unmap
//     /dev/nbd0`, again by `unmap v`, an --nbd-listen map by `unmap v`,
//     then "not mapped"; ls without a word about the missing agent; with
//     ublk=1 (the built module) `map --ublk` unmapped by /dev/ublkb0 and by
//     volume: TestUnmapScenario (nbd and ublk, about 40 s each here).
//   - nbd-kernel.sh: the nbd package's TestKernel* tests, built static and
//     run as root in the guest (TestNBDKernel): attach with two
//     connections, a busy device refused, a dropped connection replaced,
//     close back to size 0.
//   - ublk-*.sh: ublk_drv built for the guest kernel (build-ublk-module.sh)
//     and loaded, the ublk package's kernel tests, ext4 on /dev/ublkb0
//     written, remounted and verified, a clean stop and kill -9 with IO in
//     flight (ublk-mount.sh), user recovery after a crash (ublk-recover.sh)
//     and, with the map hook, a whole cluster served by `map --ublk`
//     (ublk-cluster.sh): TestUblkScenarios.
//   - agent-restart.sh: a whole cluster in the guest, `nvstripe agent` and
//     `map --agent` with no frontend flag (nbd; ublk with the built module,
//     which map then picks), ls, ext4, the agent killed -9 and restarted
//     while mounted (the device taken back: NBD_CMD_RECONFIGURE, ublk user
//     recovery), the volume grown and resize2fs run online (nbd), a
//     foreground map that exits once nbd-client -d disconnects its device,
//     fio --verify=crc32c while a target is killed, unmap: TestAgentRestart
//     (about 3 minutes under emulation, 10 on a loaded host; fio and
//     resize2fs are copied in from the host with their libraries).
//   - dm-flakey.sh: faults below the targets. The three targets of a
//     whole cluster keep their namespaces on dm-flakey devices (the guest
//     kernel's modules and the host's dmsetup shipped in, lib/dm.sh), a
//     2+1 volume is mapped on nbd and written in flushed pieces; t1's
//     device drops writes silently (TestDMFlakey, about 2 minutes under
//     emulation); with NVSTRIPE_VM_LONG=1 (TestDMFlakeyLong, about 7) also
//     bit rot under the device first, dropped writes read only after a
//     remap, then failed writes and failed IO. Every read returns the
//     acknowledged bytes or an error, never others; after each fault the
//     operator's `ns set-state in`, a remap and a scrub make t1's shards
//     whole again, checked with t2's target killed. phases=drop_crash
//     (dropped writes, then the owner killed) fails on 2+1: see the
//     scenario's header; on a 1+2 volume (TestDMFlakeyLostWrite) the new
//     owner finds t1's stale blocks against the two other shards and reads
//     the acknowledged bytes.
//   - dm-log-writes.sh: crash states replayed from the targets' write
//     logs. The three namespaces sit on dm-log-writes devices; rounds of
//     flushed writes each end with one mark in the three logs (devices
//     suspended, so one cut); the map is killed, and for every mark the
//     logs are replayed into fresh files (test/vmtest/replay, built static),
//     the targets restarted on them and the volume mapped again: every
//     acknowledged-and-flushed byte must read back. TestDMLogWrites
//     replays two marks (about 2 minutes), TestDMLogWritesLong four
//     (NVSTRIPE_VM_LONG=1).
//   - figures-ublk-nbd.sh: the figures of test/vmtest/figures.sh (not a test).
//   - resv-host.sh: the guest's nvme-cli drives NVMe reservations against
//     our target on the host (TestLinuxHostReservationsVM, in package
//     nvmeof/initiator, which serves the target in-process).
package vmtest
