# vm-modules: nbd ext4 crc32c-intel crc32c_generic
# agent-restart: a whole nvstripe cluster in the guest (embedded etcd, three
# `target serve`, a 2+1 volume) mapped through `nvstripe agent` with
# `nvstripe map v --agent SOCKET` and no frontend flag (nbd here, ublk with
# frontend=ublk: map picks ublk once /dev/ublk-control exists and says so);
# `nvstripe ls` lists it; ext4 made, mounted and written; the agent killed
# -9 and started again while mounted (it restores the mapping from its
# state and takes the kernel device back: NBD_CMD_RECONFIGURE, ublk user
# recovery) while a reader waits; files verified, more written; the volume
# grown and resize2fs run online (nbd: the kernel device gets the new size);
# a foreground `map w` whose device someone else disconnects (nbd-client
# -d) exits non-zero saying so; fio --verify=crc32c on a file in the mounted
# file system while a target is killed -9 (ls then says degraded); unmount,
# e2fsck, unmap. nbd: the device's request timeout (queue/io_timeout) is
# checked at the map and after the takeover, and a 24 MiB write before the
# growth and the 60 MiB one after it are timed (write-before-resize,
# write-after-resize: ms per MiB). Every step's duration is an @@INFO
# step-s line; the agent's log ends the console.
# Needs from the host: --file BIN:/bin/nvstripe; lib/nvstripe.sh; fio and resize2fs with
# their libraries (TestAgentRestart copies them); for frontend=ublk also
# --file KO:/lib/ublk_drv.ko.
# Parameters: frontend (nbd|ublk), file_mb (8), fio_mb (16), fio_bs (64k),
# volume_flags (extra `volume create` flags, e.g. --write-log=none).
nvs=/bin/nvstripe
frontend=${frontend:-nbd}
file_mb=${file_mb:-8}
fio_mb=${fio_mb:-16}
fio_bs=${fio_bs:-64k}
sock=/run/nvstripe/agent.sock
state=/var/lib/nvstripe/agent
mnt=/mnt/v

. /vm/scenarios/lib/nvstripe.sh

t0=$(now_s)
[ "$frontend" = ublk ] && ublk_load
command -v fio >/dev/null || fail "no fio in the guest (TestAgentRestart copies it from the host)"
cluster_up 160MiB v:64MiB w:16MiB

# start_agent: `nvstripe agent` in the background; AGENT is its pid.
start_agent() {
	_up=$(grep -c 'API on' /tmp/agent.log 2>/dev/null)
	$nvs agent --socket $sock --state-dir $state --metrics "" >>/tmp/agent.log 2>&1 &
	AGENT=$!
	# A killed agent leaves its socket file: wait for the new one's line.
	wait_for "[ \$(grep -c 'API on' /tmp/agent.log) -gt ${_up:-0} ]" 60 || fail "agent did not come up: $(tail -5 /tmp/agent.log)"
}
# ls_row: the `nvstripe ls` line of volume v (DEVICE VOLUME MODE EPOCH HEALTH
# SIZE SERVER NOTE; SIZE is two words, "64 MiB").
ls_row() { $nvs ls --agent $sock 2>/dev/null | awk '$2 == "v"'; }
# timed_fill FILE MB: MB MiB of zeros written into FILE with dd, then sync;
# FILL is "mb=MB dd_s=S sync_s=S ms_per_mib=N" (the pace of the device under
# the file system, to compare writes before and after a resize).
timed_fill() {
	_a=$(cut -d' ' -f1 /proc/uptime)
	dd if=/dev/zero of="$1" bs=1M count="$2" 2>/dev/null || return 1
	_b=$(cut -d' ' -f1 /proc/uptime)
	sync || return 1
	_c=$(cut -d' ' -f1 /proc/uptime)
	FILL=$(awk -v mb="$2" -v a="$_a" -v b="$_b" -v c="$_c" 'BEGIN {printf "mb=%d dd_s=%.1f sync_s=%.1f ms_per_mib=%d", mb, b - a, c - b, (c - a) * 1000 / mb}')
}

step "agent, map v --agent (no frontend flag)"
start_agent
run $nvs map v --agent $sock >/tmp/map.out 2>&1 || fail "map --agent: $(cat /tmp/map.out)"
cat /tmp/map.out
dev=$(sed -n 's/^mapped: \(\/dev\/[a-z]*[0-9]*\) .*/\1/p' /tmp/map.out)
[ -n "$dev" ] || fail "map --agent printed no device: $(cat /tmp/map.out)"
case "$frontend" in
nbd) want_dev=/dev/nbd0 want_why="(nbd: no /dev/ublk-control" ;;
ublk) want_dev=/dev/ublkb0 want_why="(ublk: /dev/ublk-control exists" ;;
esac
[ "$dev" = "$want_dev" ] || fail "mapped $dev, want $want_dev"
grep -q "$want_why" /tmp/map.out || fail "map did not say why it chose $frontend: $(cat /tmp/map.out)"
wait_bdev $dev 30 || fail "$dev has no size"
blk=$(basename $dev)
watch_stuck $blk
size=$(bdev_size_bytes $dev)
[ "$size" = 67108864 ] || fail "size $size, want 67108864"
row=$(ls_row)
set -- $row
[ "$1 $2 $3 $5 $6 $7 $8" = "$dev v rw ok 64 MiB agent" ] || fail "ls row '$row', want $dev v rw EPOCH ok 64 MiB agent"
epoch1=$4
info "mapped dev=$dev size=$size epoch=$epoch1 why=$(sed -n 's/.*(\(nbd\|ublk\): \(.*\))$/\1: \2/p' /tmp/map.out | tr ' ' _)"
info "ls $row"
if [ "$frontend" = nbd ]; then
	# The request timeout the attachment asked for (nbd.DefaultKernelTimeout,
	# in ms): without one Linux gives a 4-connection device 30 s and then
	# shuts sockets down and sends their requests again.
	io_timeout=$(cat /sys/block/$blk/queue/io_timeout)
	[ "$io_timeout" = 120000 ] || fail "$dev request timeout $io_timeout ms, want 120000"
	info "nbd io_timeout_ms=$io_timeout"
fi

step "mkfs.ext4, mount, write"
run mkfs.ext4 -F -q $dev
mkdir -p $mnt
run mount -t ext4 $dev $mnt
fill_files $mnt "$file_mb"

step "kill -9 the agent while mounted, start it again, read on"
t1=$(now_s)
kill -9 $AGENT
wait $AGENT 2>/dev/null
echo 3 >/proc/sys/vm/drop_caches
(cd $mnt && sha256sum -c /tmp/sums >/tmp/check-restart 2>&1; echo $? >/tmp/check-restart.rc) &
READER=$!
sleep 1
start_agent
# The old agent's lease (10 s) runs out before the new one owns v again.
wait_for "ls_row | grep -q ' ok '" 180 || fail "mapping not restored: $(ls_row); $(tail -20 /tmp/agent.log)"
wait $READER
[ "$(cat /tmp/check-restart.rc)" = 0 ] || { cat /tmp/check-restart; dmesg | tail -20; fail "reads across the agent restart failed"; }
set -- $(ls_row)
[ "$1" = "$dev" ] || fail "restored mapping on $1, want $dev"
epoch2=$4
[ "$epoch2" -gt "$epoch1" ] || fail "restored mapping's epoch $epoch2 not above $epoch1"
case "$frontend" in
nbd) took=$(grep -m1 "took over" /tmp/agent.log) ;;
ublk) took=$(grep -m1 "took .* back" /tmp/agent.log) ;;
esac
[ -n "$took" ] || fail "restarted agent did not take $dev back: $(tail -20 /tmp/agent.log)"
[ "$frontend" != nbd ] || [ "$(cat /sys/block/$blk/queue/io_timeout)" = 120000 ] ||
	fail "$dev request timeout $(cat /sys/block/$blk/queue/io_timeout) ms after the takeover, want 120000"
echo "written after the restart" >$mnt/after.txt
run sync
echo 3 >/proc/sys/vm/drop_caches
(cd $mnt && sha256sum -c /tmp/sums >/tmp/check2 2>&1) || { cat /tmp/check2; fail "files differ after the agent restart"; }
grep -q "written after the restart" $mnt/after.txt || fail "new file lost"
info "agent-restart reads-ok s=$(($(now_s) - t1)) epoch=$epoch1->$epoch2 $(echo "$took" | sed 's/.*msg=//')"

if [ "$frontend" = nbd ]; then
	step "write 24 MiB before the resize (a baseline for the write after it)"
	timed_fill $mnt/pre.bin 24 || fail "writing 24 MiB before the resize"
	rm $mnt/pre.bin
	info "write-before-resize $FILL"

	step "grow v to 96 MiB, resize2fs online"
	t2=$(now_s)
	run $nvs volume resize v --size 96MiB
	wait_for "[ \$(bdev_size_bytes $dev) = 100663296 ]" 60 || fail "$dev still $(bdev_size_bytes $dev) bytes after the resize"
	run resize2fs $dev
	blocks=$(df -k $mnt | awk 'NR==2 {print $2}')
	[ "$blocks" -gt 80000 ] || fail "ext4 has $blocks KiB after resize2fs, want about 96 MiB"

	step "write 60 MiB into the grown file system"
	timed_fill $mnt/fill.bin 60 || fail "writing 60 MiB (more than the old 64 MiB file system holds) into the grown one"
	rm $mnt/fill.bin
	info "write-after-resize $FILL"
	info "resized dev=$dev size=$(bdev_size_bytes $dev) fs_kib=$blocks s=$(($(now_s) - t2))"

	step "a foreground map whose device someone else disconnects exits"
	$nvs map w --map-sockets /run/nvstripe/map >/tmp/mapw.log 2>&1 &
	MAPW=$!
	wait_for "grep -q 'serving: /dev/nbd' /tmp/mapw.log" 120 || fail "map w: $(cat /tmp/mapw.log)"
	wdev=$(sed -n 's/^serving: \(\/dev\/nbd[0-9]*\).*/\1/p' /tmp/mapw.log)
	$nvs ls --agent $sock | grep -q "^$wdev .* map " || fail "ls does not list the foreground map of w: $($nvs ls --agent $sock)"
	run nbd-client -d $wdev
	wait_for "! kill -0 $MAPW 2>/dev/null" 30 || fail "map w still runs after nbd-client -d $wdev: $(cat /tmp/mapw.log)"
	wait $MAPW
	rc=$?
	[ $rc != 0 ] || fail "map w exited 0 after its device was disconnected"
	grep -q "detached by someone else" /tmp/mapw.log || fail "map w did not say its device was detached: $(cat /tmp/mapw.log)"
	info "detached rc=$rc $(grep -m1 'detached by someone else' /tmp/mapw.log)"
fi

step "fio --verify=crc32c in $mnt while target t1 is killed"
t3=$(now_s)
fio --name=verify --filename=$mnt/fio.dat --size=${fio_mb}M --bs=$fio_bs --rw=randwrite --ioengine=psync --direct=1 \
	--verify=crc32c --do_verify=1 --verify_fatal=1 --random_generator=lfsr --thread --status-interval=20 >/tmp/fio.log 2>&1 &
FIO=$!
sleep 3
kill -9 $T1
say "killed target t1 (pid $T1) at t=$(cut -d' ' -f1 /proc/uptime)"
while kill -0 $FIO 2>/dev/null; do # progress on the console, in case it is slow
	sleep 20
	say "fio: $(grep -o '[a-z]*: IOPS=[^,]*' /tmp/fio.log | tail -2 | tr '\n' ' ')"
done
wait $FIO
fio_rc=$?
[ $fio_rc = 0 ] || { cat /tmp/fio.log; dmesg | tail -20; fail "fio verify failed (rc $fio_rc) across the target kill"; }
grep -q "verify" /tmp/fio.log || fail "fio log has no verify phase: $(cat /tmp/fio.log)"
wait_for "ls_row | grep -q ' degraded '" 60 || fail "ls does not say degraded with t1 dead: $(ls_row)"
info "fio verify-ok mb=$fio_mb bs=$fio_bs s=$(($(now_s) - t3)) $(grep -m1 -o 'WRITE: bw=[^,]*' /tmp/fio.log) $(grep -m1 -o 'READ: bw=[^,]*' /tmp/fio.log)"
info "ls-degraded $(ls_row)"

step "umount, e2fsck, unmap"
run umount $mnt
run e2fsck -fn $dev
run $nvs unmap v --agent $sock
[ -z "$(ls_row)" ] || fail "v still listed after unmap: $(ls_row)"
case "$frontend" in
nbd) wait_for "[ \$(cat /sys/block/$blk/size) -eq 0 ]" 30 || fail "$dev still sized after unmap" ;;
ublk) wait_for "[ ! -e $dev ]" 30 || fail "$dev still exists after unmap" ;;
esac
kill $AGENT
wait $AGENT
info "unmapped dev=$dev total_s=$(($(now_s) - t0))"
