# vm-modules: nbd loop crc32c-intel crc32c_generic
# dm-flakey: disk faults below the targets. A whole cluster in the guest
# whose three `target serve` each keep namespace ns1 on a dm-flakey device
# over a loop device; a 2+1 volume mapped to /dev/nbd0 by `nvstripe map`.
# Known data is written and flushed; then, one fault at a time: random
# bytes written into t1's medium under the device (bit rot), t1's device
# dropping writes silently, failing writes, failing everything. Writes
# made during a fault are 64 KiB pieces, each flushed; after each fault
# every byte of the written part is read back with O_DIRECT and must be
# the data acknowledged (a failed write: each 4 KiB block old or new),
# or the read must fail; never other bytes. Reads must succeed where
# 2+1 can rebuild them (all but while t1 drops writes, where the volume
# may refuse blocks it cannot prove). After each fault the device
# recovers, the operator puts t1's namespace back in service, the volume
# is mapped again and a scrub runs (after bit rot it must find and heal
# bad blocks), and then t2's target is killed: the volume must still read
# right, so t1's shards were made whole again.
# Two more phases drop writes and map the volume again before reading
# them: drop_remap (a clean unmap; the checksum pages written at the
# unmap, once t1 works again, catch the stale blocks) and drop_crash (the
# owner killed -9 while t1 still drops writes, so t1's data and checksums
# agree on the old bytes). drop_crash FAILS today. The new owner, which
# never saw the newer checksums, no longer serves t1's old block as data
# without a second witness: it checks each row against parity before it
# trusts it (volume/prove.go), but with 2+1 parity cannot tell which of
# the three shards is the stale one, so the read fails (EIO) where the
# scenario wants the acknowledged bytes; and a stripe written since its
# last flush when the owner is killed is resynced as its data holds it.
# Telling the stale shard apart with one parity shard needs an order of
# versions (a generation beside each checksum: a new format). Reproduce
# with run-vm.sh ... dm-flakey.sh phases=drop_crash.
# Needs nvstripe (--file BIN:/bin/nvstripe), dmsetup and the dm modules
# (lib/dm.sh) and lib/nvstripe.sh. Parameters: phases (the faults in
# order, comma-separated; default
# rot,drop_writes,drop_remap,error_writes,eio), volume_flags (extra
# `volume create` flags with commas for spaces, e.g.
# volume_flags=--checksum=none,--write-log=none: a volume without
# checksums, on which the scenario fails, as it must: the dropped writes
# come back as wrong data).
nvs=/bin/nvstripe
dev=/dev/nbd0
mb=64                 # each namespace device, MiB
sectors=$((mb * 2048))
data_mb=6             # the part of the volume the scenario writes
volume_flags=$(echo "${volume_flags:-}" | tr ',' ' ')
phases=${phases:-rot,drop_writes,drop_remap,error_writes,eio}

. /vm/scenarios/lib/nvstripe.sh
. /vm/scenarios/lib/dm.sh

dm_load

step "three flakey devices over loop devices, as the targets' ns1"
for i in 1 2 3; do
	eval "L$i=\$(dm_loop /tmp/d$i.img $mb)"
	eval "dm_create fl$i \"\$(flakey_table \$L$i $sectors up)\""
	mkdir -p /tmp/t$i
	ln -s /dev/mapper/fl$i /tmp/t$i/ns1.img
done

# fault N MODE: put device flN in MODE (flakey_table).
fault() {
	eval "_l=\$L$1"
	dm_reload fl$1 "$(flakey_table "$_l" $sectors "$2")"
	say "fl$1: $2 ($(dmsetup table fl$1))"
}

cluster_up ${mb}MiB v:32MiB
run $nvs volume info v

# map_v: `nvstripe map v` on $dev in the background (MAP). Its log goes on
# /tmp/agent.log, which lib/nvstripe.sh prints at the end.
map_v() {
	echo "--- map started at t=$(cut -d' ' -f1 /proc/uptime)" >>/tmp/agent.log
	_served=$(grep -c "serving: $dev" /tmp/agent.log)
	$nvs map v --nbd $dev >>/tmp/agent.log 2>&1 &
	MAP=$!
	wait_for "[ \$(grep -c 'serving: $dev' /tmp/agent.log) -gt $_served ]" 120 ||
		fail "map printed no device: $(tail -n 20 /tmp/agent.log)"
	wait_bdev $dev 30 || fail "$dev has no size"
}

step "map v on $dev"
map_v

# put FILE MB_OFFSET: write FILE at MB_OFFSET MiB of the volume with
# O_DIRECT and flush (fsync: NBD_CMD_FLUSH); the same into /tmp/want.
put() {
	dd if="$1" of=$dev bs=1M seek="$2" oflag=direct conv=notrunc,fsync 2>/tmp/put.err || fail "write: $(cat /tmp/put.err)"
	dd if="$1" of=/tmp/want bs=1M seek="$2" conv=notrunc 2>/dev/null
}

# pieces WHAT MB_OFFSET: write 1 MiB of new data at MB_OFFSET MiB as 16
# pieces of 64 KiB, each with O_DIRECT and flushed. An acknowledged piece
# goes into /tmp/want; a failed one may have left old or new data in each
# 4 KiB block, so its old and new bytes go to /tmp/either (checked by
# check). Sets ok and failed.
pieces() {
	pattern_file /tmp/new.bin 1
	ok=0 failed=0
	_p=0
	while [ $_p -lt 16 ]; do
		_at=$(($2 * 16 + _p)) # in 64 KiB
		dd if=/tmp/new.bin of=/tmp/piece bs=64k skip=$_p count=1 2>/dev/null
		if dd if=/tmp/piece of=$dev bs=64k seek=$_at oflag=direct conv=notrunc,fsync 2>/tmp/put.err; then
			dd if=/tmp/piece of=/tmp/want bs=64k seek=$_at conv=notrunc 2>/dev/null
			ok=$((ok + 1))
		else
			dd if=/tmp/want of=/tmp/either-old-$_at bs=64k skip=$_at count=1 2>/dev/null
			cp /tmp/piece /tmp/either-new-$_at
			echo $_at >>/tmp/either
			failed=$((failed + 1))
		fi
		_p=$((_p + 1))
	done
	info "writes $1 ok=$ok failed=$failed"
}

# check WHAT: read the first data_mb MiB of the volume with O_DIRECT (no
# page cache anywhere) and compare with /tmp/want, where every 4 KiB block
# of a failed write may hold its old or its new bytes: FAIL on other bytes,
# return 1 on a read error, 0 on the right data.
check() {
	if ! dd if=$dev of=/tmp/got bs=1M count=$data_mb iflag=direct 2>/tmp/check.err; then
		info "read-error $1: $(tail -n1 /tmp/check.err)"
		return 1
	fi
	cp /tmp/want /tmp/want-now
	for _at in $(cat /tmp/either 2>/dev/null); do
		_b=0
		while [ $_b -lt 16 ]; do
			dd if=/tmp/got of=/tmp/blk bs=4k skip=$((_at * 16 + _b)) count=1 2>/dev/null
			dd if=/tmp/either-new-$_at of=/tmp/blk-new bs=4k skip=$_b count=1 2>/dev/null
			dd if=/tmp/either-old-$_at of=/tmp/blk-old bs=4k skip=$_b count=1 2>/dev/null
			if cmp -s /tmp/blk /tmp/blk-new; then
				dd if=/tmp/blk of=/tmp/want-now bs=4k seek=$((_at * 16 + _b)) conv=notrunc 2>/dev/null
			elif ! cmp -s /tmp/blk /tmp/blk-old; then
				fail "$1: block $((_at * 16 + _b)) (of a failed write) holds neither its old nor its new bytes"
			fi
			_b=$((_b + 1))
		done
	done
	if ! cmp -s /tmp/got /tmp/want-now; then
		info "wrong-data $1: $(cmp /tmp/got /tmp/want-now 2>&1 | head -n1)"
		fail "$1: the volume returned wrong data"
	fi
	info "right-data $1"
}

state() {
	$nvs ns ls
	$nvs admin status
}

# scrub WHAT: `admin scrub v --wait`; its summary line is in /tmp/scrub.out
# and an @@INFO line.
scrub() {
	$nvs admin scrub v --wait --timeout 300s >/tmp/scrub.out 2>&1 || { cat /tmp/scrub.out; fail "$1: scrub failed"; }
	info "scrub $1: $(grep 'scrub done' /tmp/scrub.out)"
}

# recover WHAT: t1's device works again; the operator puts its namespace
# back in service (a media error marked it failed) and scrubs, which
# rebuilds what t1 missed. Then t2's target is killed: every byte must
# still read right from t1 and t3, so t1's shards are whole again; t2
# restarts and the map takes it back. (t2 is killed rather than its device
# failed: a read that meets a media error leaves the slot distrusted in
# the owner until the volume is mapped again, which no scrub repairs, and
# the next phase would meet a volume degraded already.)
recover() {
	fault 1 up
	all_up "$1"
	$nvs ns set-state t1-n1 in || fail "ns set-state t1-n1 in"
	remap "$1"
	scrub "$1"
	kill -9 $T2
	wait $T2 2>/dev/null
	check "$1-redundant" || fail "$1: read with t2 down after t1 recovered failed: t1's shards were not restored"
	$nvs target serve --dir /tmp/t2 --listen 127.0.0.1:4422 --nqn nqn.2026-11.io.example:t2 \
		--ns ns1:${mb}MiB --allow-host any >>/tmp/t2.log 2>&1 &
	T2=$!
	all_up "$1"
	state
}

# remap WHAT: unmap v (the map process exits on SIGTERM, flushing) and map
# it again. The new owner's open rebuilds the slots that the stale log
# names. It is needed today: a slot that met a media error on a read is
# distrusted by the owner from there on, and neither the owner's upkeep
# (it repairs when a namespace that was down answers again) nor a scrub
# rebuilds it while the volume stays mapped.
remap() {
	kill -TERM $MAP
	wait $MAP
	wait_for "[ \$(cat /sys/block/nbd0/size) -eq 0 ]" 30 || fail "$1: $dev still sized after unmap"
	map_v
}

# all_up WHAT: wait until the map uses every namespace again (`nvstripe
# ls` names none down: the map probes a down one every few seconds and
# takes it back once it answers).
all_up() {
	wait_for "$nvs ls >/tmp/ls.out 2>&1 && ! grep -q 'down:' /tmp/ls.out" 120 ||
		fail "$1: namespaces still down: $(cat /tmp/ls.out)"
}

step "write ${data_mb} MiB of known data, flush, read back"
pattern_file /tmp/a.bin $data_mb
: >/tmp/want
put /tmp/a.bin 0
check healthy || fail "healthy read failed"

# The first slot (16 MiB) of a namespace holds its label; the volume's
# slots come after it.
phase_rot() {
	step "bit rot on t1's medium: a 4 KiB block of every 512 KiB of its slots overwritten below dm"
	_o=32
	while [ $_o -lt $((mb * 2)) ]; do
		dd if=/dev/urandom of=$L1 bs=4k seek=$((_o * 128)) count=1 oflag=direct conv=notrunc 2>/dev/null || fail "rot $L1"
		_o=$((_o + 1))
	done
	check rot || fail "read with t1's medium rotten failed (2+1 can rebuild it)"
	scrub rot
	_bad=$(sed -n 's/.*segments, \([0-9]*\) blocks bad, \([0-9]*\) healed.*/\1 \2/p' /tmp/scrub.out)
	[ -n "$_bad" ] && [ "${_bad% *}" -gt 0 ] && [ "${_bad% *}" = "${_bad#* }" ] ||
		fail "rot: scrub found and healed no rotten block of t1 (bad healed: '$_bad')"
	recover rot
}

phase_drop_writes() {
	step "t1 drops writes silently"
	fault 1 drop_writes
	pieces drop_writes 2
	check drop_writes-during || say "reads fail while t1 drops writes"
	fault 1 up
	check drop_writes-after || fail "read after t1 dropped writes failed"
	recover drop_writes
}

# Not in the default phases: the writes t1 dropped, then the volume mapped
# again before anything read them. The new owner loads t1's checksums from
# t1, where they were dropped with the data.
phase_drop_remap() {
	step "t1 drops writes silently; the volume is mapped again before they are read"
	fault 1 drop_writes
	pieces drop_remap 5
	fault 1 up
	remap drop_remap
	check drop_remap-after || fail "read after t1 dropped writes and a remap failed"
	recover drop_remap
}

# Not in the default phases: the writes t1 dropped, then the owner killed
# -9 while t1 still drops them (its last checksum pages are dropped too),
# and mapped again once t1 works.
phase_drop_crash() {
	step "t1 drops writes silently; the owner is killed; the volume is mapped again"
	fault 1 drop_writes
	pieces drop_crash 5
	kill -9 $MAP
	wait $MAP 2>/dev/null
	fault 1 up
	wait_for "[ \$(cat /sys/block/nbd0/size) -eq 0 ] || ! [ -e /sys/block/nbd0/pid ]" 30
	_t=0
	while :; do
		_served=$(grep -c "serving: $dev" /tmp/agent.log)
		$nvs map v --nbd $dev >>/tmp/agent.log 2>&1 &
		MAP=$!
		wait_for "[ \$(grep -c 'serving: $dev' /tmp/agent.log) -gt $_served ] || ! kill -0 $MAP" 120
		[ "$(grep -c "serving: $dev" /tmp/agent.log)" -gt "$_served" ] && break
		_t=$((_t + 1))
		[ $_t -lt 40 ] || fail "drop_crash: map did not come back: $(tail -n 5 /tmp/agent.log)"
		sleep 1
	done
	wait_bdev $dev 30 || fail "$dev has no size"
	check drop_crash-after || fail "read after t1 dropped writes and the owner crashed failed"
	recover drop_crash
}

phase_error_writes() {
	step "t1 fails writes"
	fault 1 error_writes
	pieces error_writes 3
	check error_writes || fail "read with t1 failing writes failed (its reads work)"
	recover error_writes
}

phase_eio() {
	step "t1 fails everything"
	fault 1 eio
	pieces eio 4
	check eio || fail "read with t1 failing everything failed (2+1 can rebuild it)"
	recover eio
}

for p in $(echo "$phases" | tr ',' ' '); do
	phase_$p
done
info "dm-flakey done phases=$phases"
