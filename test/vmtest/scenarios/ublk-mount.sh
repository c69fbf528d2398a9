# vm-modules: ext4 crc32c-intel crc32c_generic
# ublk-mount: nvstripe's ublk server against the guest kernel's ublk_drv
# (6.1: legacy command numbers, kernel-copied data). Needs, from the host:
#   --file "$(../shared/vm/build-ublk-module.sh):/lib/ublk_drv.ko"
#   --file "<CGO_ENABLED=0 go test -c ./ublk>:/ublk.test"
#   lib/nvstripe.sh (see there)
# 1. the Go kernel tests (TestKernelIO: O_DIRECT IO, EIO from a failing
#    device, fsync, BLKDISCARD, stop and delete; IO inline and on goroutines);
# 2. a 256 MiB in-memory device served by TestKernelServe: size, dd
#    write/read-back, mkfs.ext4, mount, files, sync, umount, remount, verify,
#    e2fsck; SIGTERM stops it, and /dev/ublkbN and /dev/ublkcN must be gone;
# 3. kill -9 of the server with a dd writing: the driver must remove
#    /dev/ublkbN and fail the IO (dd exits, nothing hangs); /dev/ublkcN stays
#    until DEL_DEV, which TestKernelDelete sends.
# Parameters: async (1: the served device runs IO on goroutines; default 1),
#   size_mb (256), file_mb (8).
async=${async:-1}
size_mb=${size_mb:-256}
file_mb=${file_mb:-8}
T=/ublk.test
. /vm/scenarios/lib/nvstripe.sh

ublk_load

step "Go kernel tests"
$T -test.run '^TestKernel(IO|ReadOnly)$' -test.v -test.count=1 >/tmp/kio.log 2>&1
rc=$?
cat /tmp/kio.log
[ $rc -eq 0 ] || fail "TestKernelIO or TestKernelReadOnly failed (rc=$rc)"
grep -q -- '--- SKIP' /tmp/kio.log && fail "a kernel test skipped"
[ "$(grep -c '^--- PASS: TestKernel' /tmp/kio.log)" -eq 2 ] || fail "TestKernelIO and TestKernelReadOnly did not both pass"

# serve ASYNC: start TestKernelServe in the background; sets srv and dev
serve() {
	rm -f /tmp/ublk.path
	UBLK_VM_SERVE=/tmp/ublk.path UBLK_VM_SIZE_MB=$size_mb UBLK_VM_ASYNC=$1 \
		$T -test.run '^TestKernelServe$' -test.v -test.count=1 >/tmp/serve.log 2>&1 &
	srv=$!
	wait_for "[ -s /tmp/ublk.path ]" 120 || { cat /tmp/serve.log; fail "server did not come up"; }
	dev=$(cat /tmp/ublk.path)
	wait_bdev "$dev" 20 || fail "$dev has no size"
	say "serving $dev (pid $srv)"
}

step "serve ${size_mb} MiB (async=$async)"
serve "$async"
size=$(blockdev --getsize64 "$dev" 2>/dev/null || bdev_size_bytes "$dev")
[ "$size" -eq $((size_mb * 1048576)) ] || fail "$dev size $size, want $((size_mb * 1048576))"
say "$dev size=$size bs=$(cat /sys/class/block/$(basename "$dev")/queue/logical_block_size)"

step "dd write + read-back"
pattern_file /tmp/pat 4
run dd if=/tmp/pat of="$dev" bs=1M seek=100 conv=fsync
echo 3 >/proc/sys/vm/drop_caches
run dd if="$dev" of=/tmp/back bs=1M skip=100 count=4
cmp -s /tmp/pat /tmp/back || fail "read-back differs from what dd wrote"

step "mkfs.ext4 + mount + write"
run mkfs.ext4 -F -q "$dev"
mkdir -p /mnt/u
run mount -t ext4 "$dev" /mnt/u
fill_files /mnt/u "$file_mb" 40
run umount /mnt/u

step "remount + verify"
echo 3 >/proc/sys/vm/drop_caches
run mount -t ext4 "$dev" /mnt/u
(cd /mnt/u && sha256sum -c /tmp/sums >/tmp/check 2>&1) || { cat /tmp/check; fail "files differ after remount"; }
say "$(wc -l </tmp/sums) files verified after remount"
run umount /mnt/u
run e2fsck -fn "$dev"

step "SIGTERM: clean stop"
kill -TERM "$srv"
wait "$srv"
rc=$?
cat /tmp/serve.log
[ $rc -eq 0 ] || fail "server exited with rc=$rc"
grep -q -- '--- PASS: TestKernelServe' /tmp/serve.log || fail "TestKernelServe did not pass"
[ -e "$dev" ] && fail "$dev still there after the server stopped"
id=${dev#/dev/ublkb}
[ -e "/dev/ublkc$id" ] && fail "/dev/ublkc$id still there after the server stopped"

step "kill -9 with IO in flight"
serve 0
# dd over the whole device again and again until the device fails it
(while dd if=/dev/zero of="$dev" bs=64k count=$((size_mb * 16)) conv=fsync 2>/tmp/dd.log; do :; done) &
ddpid=$!
sleep 2
kill -0 "$ddpid" || fail "the dd loop ended before the kill"
kill -9 "$srv"
wait_for "[ ! -e $dev ]" 60 || fail "$dev still there 60 s after kill -9"
wait_for "! kill -0 $ddpid" 60 || fail "dd stuck after kill -9 of the server"
wait "$ddpid"
say "dd loop after kill -9: rc=$? $(tail -n 2 /tmp/dd.log | tr '\n' ' ')"
stuck=$(grep -l '^State:.D' /proc/[0-9]*/status 2>/dev/null | wc -l)
say "tasks in D state: $stuck"
id=${dev#/dev/ublkb}
[ -e "/dev/ublkc$id" ] && say "/dev/ublkc$id left by the killed server (6.1 keeps it until DEL_DEV)"
UBLK_VM_DELETE=$id $T -test.run '^TestKernelDelete$' -test.v -test.count=1 >/tmp/del.log 2>&1
rc=$?
cat /tmp/del.log
[ $rc -eq 0 ] || fail "TestKernelDelete failed"
[ -e "/dev/ublkc$id" ] && fail "/dev/ublkc$id still there after DEL_DEV"
say "ublk-mount done"
