// Package vmtest runs the project's kernel scenarios (scenarios/*.sh) in the
// QEMU guest of the team's VM harness (run-vm.sh, a Debian 6.1 kernel under
// emulation), for code that needs kernel drivers this host lacks: ublk_drv
// for package ublk. The harness is found through $VM_DIR or ../shared/vm
// next to the repository; without it, or with -short, the tests skip and say
// why. It holds no code outside its tests.
package vmtest
