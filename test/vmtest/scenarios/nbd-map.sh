# vm-modules: nbd ext4 crc32c-intel crc32c_generic
# nbd-map: a whole nvstripe cluster in the guest (embedded etcd, three
# `target serve`, a 2+1 volume), mapped to a kernel nbd device by
# `nvstripe map` over netlink with 4 connections; ext4 on it, written,
# remounted and verified; a second map of the busy device refused; unmap
# leaves the device at size 0. With long=1 (about 2 more minutes under TCG)
# also: the map process killed and restarted while reads wait (the kernel
# holds IO, the new process takes the device over), and a target killed
# while mounted.
# Needs the static binary (run-vm.sh --file BIN:/bin/nvstripe) and
# lib/nvstripe.sh (see there).
# Parameters: file_mb (8), long (0), map_cmd ("map": `nvstripe map VOL`;
#   "nbd": `nvstripe map VOL --nbd /dev/nbd0`), holder (a --holder NAME;
#   default none: the guest's hostname is unset, "(none)", and map copes).
nvs=/bin/nvstripe
conns=4 # nbd.AttachOptions' default
file_mb=${file_mb:-8}
long=${long:-0}
map_cmd=${map_cmd:-map}
hflag=${holder:+--holder $holder}
dev=/dev/nbd0

. /vm/scenarios/lib/nvstripe.sh

t0=$(now_s)
cluster_up 64MiB v:64MiB w:16MiB

# map_v LOG: start `nvstripe map v` in the background; MAP is its pid.
map_v() {
	if [ "$map_cmd" = nbd ]; then
		$nvs map v --nbd $dev $hflag >"$1" 2>&1 &
	else
		$nvs map v $hflag >"$1" 2>&1 &
	fi
	MAP=$!
}

step "map v ($conns connections)"
map_v /tmp/map1.log
wait_for "grep -q 'serving: $dev' /tmp/map1.log" 120 || fail "map printed no device: $(cat /tmp/map1.log)"
wait_bdev $dev 30 || fail "$dev has no size"
size=$(bdev_size_bytes $dev)
pid=$(cat /sys/block/nbd0/pid) # the thread that connected: compare its process
tgid=$(awk '/^Tgid:/ {print $2}' /proc/$pid/status)
queues=$(ls /sys/block/nbd0/mq | wc -l) # one per connection, at most one per CPU
cpus=$(grep -c ^processor /proc/cpuinfo)
want_queues=$((conns < cpus ? conns : cpus))
backend=$(cat /sys/block/nbd0/backend 2>/dev/null)
info "mapped dev=$dev size=$size pid=$pid tgid=$tgid map=$MAP queues=$queues backend=$backend"
[ "$size" = 67108864 ] || fail "size $size, want 67108864"
[ "$tgid" = "$MAP" ] || fail "pid $pid is of process $tgid, want the map process $MAP"
[ "$queues" = "$want_queues" ] || fail "$queues hardware queues, want $want_queues ($conns connections, $cpus CPUs)"
[ "$backend" = v ] || fail "backend '$backend', want v"

step "mkfs.ext4, mount, write, umount, remount, verify"
t1=$(now_s)
run mkfs.ext4 -F -q $dev
mkdir -p /mnt/v
run mount -t ext4 $dev /mnt/v
fill_files /mnt/v "$file_mb"
run umount /mnt/v
echo 3 >/proc/sys/vm/drop_caches
run mount -t ext4 $dev /mnt/v
(cd /mnt/v && sha256sum -c /tmp/sums >/tmp/check 2>&1) || { cat /tmp/check; fail "files differ after remount"; }
info "verified files=$(wc -l </tmp/sums) s=$(($(now_s) - t1))"

step "a second map of the busy device is refused"
if $nvs map w --nbd $dev $hflag >/tmp/map-busy.log 2>&1; then
	fail "second map of $dev succeeded: $(cat /tmp/map-busy.log)"
fi
grep -q "in use" /tmp/map-busy.log || fail "second map failed without saying the device is in use: $(cat /tmp/map-busy.log)"
info "busy-refused: $(grep -m1 'in use' /tmp/map-busy.log)"

if [ "$long" = 1 ]; then
	step "kill -9 the map process, read on, restart it"
	t2=$(now_s)
	kill -9 $MAP
	wait $MAP 2>/dev/null
	echo 3 >/proc/sys/vm/drop_caches
	(cd /mnt/v && sha256sum -c /tmp/sums >/tmp/check-dead 2>&1; echo $? >/tmp/check-dead.rc) &
	READER=$!
	sleep 1
	# The old owner's lease (10s) must expire before the new process owns v;
	# until then map fails ("in use") and is started again.
	tries=0
	while :; do
		say "map attempt $tries at t=$(cut -d' ' -f1 /proc/uptime)"
		map_v /tmp/map2.log
		wait_for "grep -q 'serving: $dev' /tmp/map2.log || ! kill -0 $MAP" 120
		grep -q "serving: $dev" /tmp/map2.log && break
		say "refused: $(tail -1 /tmp/map2.log)"
		tries=$((tries + 1))
		[ $tries -lt 30 ] || fail "map did not come back: $(cat /tmp/map2.log)"
		sleep 1
	done
	say "map back after $tries refusals at t=$(cut -d' ' -f1 /proc/uptime): $(cat /tmp/map2.log)"
	wait $READER
	[ "$(cat /tmp/check-dead.rc)" = 0 ] || { cat /tmp/check-dead; dmesg | tail -20; fail "reads across the restart failed"; }
	grep -q "took over" /tmp/map2.log || fail "restarted map did not take over the device: $(cat /tmp/map2.log)"
	info "restart reads-ok tries=$tries s=$(($(now_s) - t2)) $(grep -m1 'took over' /tmp/map2.log)"
	echo "new file after restart" >/mnt/v/after.txt
	run sync

	step "long: kill -9 target t1, read everything degraded"
	kill -9 $T1
	echo 3 >/proc/sys/vm/drop_caches
	(cd /mnt/v && sha256sum -c /tmp/sums >/tmp/check-deg 2>&1) || { cat /tmp/check-deg; fail "degraded read failed"; }
	info "degraded reads ok"
fi

step "umount, unmap"
run umount /mnt/v
run e2fsck -fn $dev
if [ "$map_cmd" = nbd ]; then
	run kill -TERM $MAP
else
	run $nvs unmap $dev
fi
wait_for "[ \$(cat /sys/block/nbd0/size) -eq 0 ] && [ ! -e /sys/block/nbd0/pid ]" 30 || fail "$dev still sized or connected after unmap"
wait $MAP
info "unmapped size=$(cat /sys/block/nbd0/size) total_s=$(($(now_s) - t0))"
