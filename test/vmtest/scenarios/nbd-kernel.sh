# vm-modules: nbd
# nbd-kernel: the nbd package's own tests against the guest kernel's nbd
# driver (TestKernel*: attach over netlink with two connections, IO, a busy
# device refused, a dropped connection replaced by NBD_CMD_RECONFIGURE,
# close back to size 0). Needs the static test binary:
# CGO_ENABLED=0 go test -c -o nbd.test ./nbd, run-vm.sh --file nbd.test:/bin/nbd.test.
step "nbd package tests on the real kernel"
NVSTRIPE_KERNEL_NBD=1 /bin/nbd.test -test.run '^TestKernel' -test.v -test.count=1 >/tmp/nbd-test.log 2>&1
rc=$?
cat /tmp/nbd-test.log
grep -E '^(---|ok|PASS|FAIL)' /tmp/nbd-test.log | while read -r l; do info "go-test $l"; done
[ $rc = 0 ] || fail "nbd kernel tests failed (rc=$rc)"
grep -q -- '--- PASS: TestKernelAttach' /tmp/nbd-test.log || fail "TestKernelAttach did not pass (skipped?)"
