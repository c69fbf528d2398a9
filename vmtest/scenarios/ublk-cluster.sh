# vm-modules: ext4 crc32c-intel crc32c_generic
# ublk-cluster: a whole nvstripe cluster in the guest (etcd, three
# `target serve`, a 2+1 volume) mapped with `nvstripe map v --ublk`:
# mkfs.ext4, mount, write, remount and verify; one target killed and every
# file read back degraded; interrupting map removes /dev/ublkbN.
# Needs, from the host:
#   --file "$(../shared/vm/build-ublk-module.sh):/lib/ublk_drv.ko"
#   --file "<CGO_ENABLED=0 go build ./cmd/nvstripe>:/nvstripe"
# Parameters: file_mb (8).
file_mb=${file_mb:-8}
N=/nvstripe
E="--etcd 127.0.0.1:2379"

step "insmod /lib/ublk_drv.ko"
run insmod /lib/ublk_drv.ko
wait_for "[ -e /dev/ublk-control ]" 10 || fail "no /dev/ublk-control"
ip link set lo up 2>/dev/null

step "etcd and three targets"
$N etcd --dir /tmp/etcd >/tmp/etcd.log 2>&1 &
for i in 1 2 3; do
	mkdir -p /tmp/t$i
	$N target serve --dir /tmp/t$i --listen 127.0.0.1:442$i --nqn nqn.2026-11.io.example:t$i \
		--ns ns1:96MiB --allow-host any >/tmp/t$i.log 2>&1 &
	eval "t$i=\$!"
done
wait_for "$N cluster init --slot-size 16MiB $E" 120 || { cat /tmp/etcd.log; fail "cluster init (etcd not up?)"; }
for i in 1 2 3; do
	run $N host add t$i --label rack=r$i $E
	wait_for "$N ns add --host t$i --nqn nqn.2026-11.io.example:t$i --nsid 1 --path tcp://127.0.0.1:442$i $E" 60 ||
		{ cat /tmp/t$i.log; fail "ns add t$i"; }
done
run $N volume create v --size 64MiB --k 2 --m 1 $E

step "nvstripe map v --ublk"
$N map v --ublk --holder vmtest $E >/tmp/map.log 2>&1 &
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
pattern_file /mnt/v/big.bin "$file_mb"
i=0
while [ $i -lt 20 ]; do
	echo "file $i" >"/mnt/v/small-$i.txt"
	i=$((i + 1))
done
(cd /mnt/v && find . -type f | sort | xargs sha256sum) >/tmp/sums
run sync
run umount /mnt/v
echo 3 >/proc/sys/vm/drop_caches
run mount -t ext4 "$dev" /mnt/v
(cd /mnt/v && sha256sum -c /tmp/sums >/tmp/check 2>&1) || { cat /tmp/check; fail "files differ after remount"; }
say "$(wc -l </tmp/sums) files verified after remount"

step "kill target t3: read back degraded, write degraded, verify"
kill -9 "$t3"
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
