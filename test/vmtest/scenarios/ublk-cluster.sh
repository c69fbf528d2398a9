# vm-modules: ext4 crc32c-intel crc32c_generic
# ublk-cluster: a whole nvstripe cluster in the guest (etcd, three
# `target serve`, a 2+1 volume) mapped with `nvstripe map v --ublk`:
# mkfs.ext4, mount, write, remount and verify; one target killed and every
# file read back degraded; interrupting map removes /dev/ublkbN.
# Needs, from the host:
#   --file "$(../shared/vm/build-ublk-module.sh):/lib/ublk_drv.ko"
#   --file "<CGO_ENABLED=0 go build ./cmd/nvstripe>:/nvstripe"
#   lib/nvstripe.sh (see there)
# Parameters: file_mb (8).
file_mb=${file_mb:-8}
nvs=/nvstripe
. /vm/scenarios/lib/nvstripe.sh

ublk_load
cluster_up 96MiB v:64MiB

step "nvstripe map v --ublk"
$nvs map v --ublk --holder vmtest >/tmp/map.log 2>&1 &
mp=$!
wait_for "grep -q '^serving: ' /tmp/map.log || ! kill -0 $mp" 120
grep -q '^serving: ' /tmp/map.log || { cat /tmp/map.log; fail "map --ublk did not serve"; }
dev=$(sed -n 's/^serving: //p' /tmp/map.log)
say "map printed: $(cat /tmp/map.log)"
case "$dev" in /dev/ublkb*) ;; *) fail "map --ublk served $dev, want /dev/ublkbN" ;; esac
wait_bdev "$dev" 20 || fail "$dev has no size"
[ "$(bdev_size_bytes "$dev")" -eq $((64 << 20)) ] || fail "$dev size $(bdev_size_bytes "$dev"), want 64 MiB"

step "mkfs.ext4, mount, write, remount, verify"
run mkfs.ext4 -F -q "$dev"
mkdir -p /mnt/v
run mount -t ext4 "$dev" /mnt/v
fill_files /mnt/v "$file_mb"
run umount /mnt/v
echo 3 >/proc/sys/vm/drop_caches
run mount -t ext4 "$dev" /mnt/v
(cd /mnt/v && sha256sum -c /tmp/sums >/tmp/check 2>&1) || { cat /tmp/check; fail "files differ after remount"; }
say "$(wc -l </tmp/sums) files verified after remount"

step "kill target t3: read back degraded, write degraded, verify"
kill -9 "$T3"
run umount /mnt/v
echo 3 >/proc/sys/vm/drop_caches
run mount -t ext4 "$dev" /mnt/v
(cd /mnt/v && sha256sum -c /tmp/sums >/tmp/check 2>&1) || { cat /tmp/check; fail "files differ with t3 down"; }
say "$(wc -l </tmp/sums) files verified with target t3 killed"
pattern_file /mnt/v/degraded.bin 4
(cd /mnt/v && sha256sum degraded.bin) >>/tmp/sums
run sync
run umount /mnt/v
echo 3 >/proc/sys/vm/drop_caches
run mount -t ext4 -o ro "$dev" /mnt/v
(cd /mnt/v && sha256sum -c /tmp/sums >/tmp/check 2>&1) || { cat /tmp/check; fail "files differ after a degraded write"; }
say "$(wc -l </tmp/sums) files verified after writing with t3 down"
run umount /mnt/v

step "interrupt map: unmap"
kill -INT "$mp"
wait_for "! kill -0 $mp" 60 || fail "map did not exit after SIGINT"
cat /tmp/map.log
[ -e "$dev" ] && fail "$dev still there after map exited"
[ -e "/dev/ublkc${dev#/dev/ublkb}" ] && fail "/dev/ublkc${dev#/dev/ublkb} still there after map exited"
say "ublk-cluster done"
