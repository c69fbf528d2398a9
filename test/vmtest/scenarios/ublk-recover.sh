# vm-modules: ext4 crc32c-intel crc32c_generic
# ublk-recover: a server that dies is replaced without losing the device.
# Needs the same --file arguments as ublk-mount. A file-backed device
# (on the guest's tmpfs, so it outlives the server process) is served with
# Options.Recovery; ext4 is made, mounted and written; the server is killed
# with -9 while a reader waits on the device. The 6.1 driver then quiesces
# the device instead of removing it: /dev/ublkbN must stay and the reader
# must wait, not fail. A new server takes the device back with Recover; the
# reader completes, every file verifies, and a clean stop removes the
# device. Parameters: size_mb (128), file_mb (8).
size_mb=${size_mb:-128}
file_mb=${file_mb:-8}
T=/ublk.test
img=/tmp/backing.img
. /vm/scenarios/lib/nvstripe.sh

ublk_load

# serve LOG [KEY=VALUE...]: start TestKernelServe in the background on the
# file; sets srv and dev
serve() {
	log=$1
	shift
	rm -f /tmp/ublk.path
	env UBLK_VM_SERVE=/tmp/ublk.path UBLK_VM_SIZE_MB=$size_mb UBLK_VM_FILE=$img UBLK_VM_ASYNC=1 "$@" \
		$T -test.run '^TestKernelServe$' -test.v -test.count=1 >"$log" 2>&1 &
	srv=$!
	wait_for "[ -s /tmp/ublk.path ]" 120 || { cat "$log"; fail "server did not come up"; }
	dev=$(cat /tmp/ublk.path)
	wait_bdev "$dev" 20 || fail "$dev has no size"
	say "serving $dev (pid $srv)"
}

step "serve with recovery, mkfs, mount, write"
serve /tmp/serve1.log UBLK_VM_RECOVERY=1
run mkfs.ext4 -F -q "$dev"
mkdir -p /mnt/u
run mount -t ext4 "$dev" /mnt/u
fill_files /mnt/u "$file_mb"

step "kill -9 the server"
kill -9 "$srv"
wait "$srv"
sleep 7 # the driver checks for a dead server every 5 s
[ -e "$dev" ] || fail "$dev removed although the device was added with recovery"
id=${dev#/dev/ublkb}
echo 3 >/proc/sys/vm/drop_caches
sha256sum /mnt/u/big.bin >/tmp/reader.out 2>&1 &
reader=$!
sleep 2
kill -0 "$reader" 2>/dev/null || { cat /tmp/reader.out; fail "a read of the quiesced device did not wait"; }
say "reader $reader waits on the quiesced device"

step "recover with a new server"
serve /tmp/serve2.log UBLK_VM_RECOVER="$id"
[ "$dev" = "/dev/ublkb$id" ] || fail "recovered $dev, want /dev/ublkb$id"
wait_for "! kill -0 $reader" 60 || fail "the reader still waits after recovery"
wait "$reader" || { cat /tmp/reader.out; fail "the read failed across recovery"; }
(cd /mnt/u && sha256sum -c /tmp/sums >/tmp/check 2>&1) || { cat /tmp/check; fail "files differ after recovery"; }
say "reader done and $(wc -l </tmp/sums) files verified after recovery"
echo "after recovery" >/mnt/u/after.txt
run umount /mnt/u
run e2fsck -fn "$dev"

step "SIGTERM: clean stop"
kill -TERM "$srv"
wait "$srv"
rc=$?
cat /tmp/serve2.log
[ $rc -eq 0 ] || fail "recovered server exited with rc=$rc"
[ -e "$dev" ] && fail "$dev still there after the server stopped"
[ -e "/dev/ublkc$id" ] && fail "/dev/ublkc$id still there after the server stopped"
say "ublk-recover done"
