# vm-modules: nbd loop crc32c-intel crc32c_generic
# dm-log-writes: crash states of the targets' devices, replayed from their
# write logs (CrashMonkey / ALICE style). A whole cluster in the guest
# whose three `target serve` each keep namespace ns1 on a dm-log-writes
# device (data and log on loop devices); a 2+1 volume mapped to /dev/nbd0
# by `nvstripe map`. Each round writes known data with O_DIRECT, flushes
# it (NBD_CMD_FLUSH), and then, with the three devices suspended so that
# no write falls between them, puts the same mark in the three logs: what
# the volume acknowledged as flushed at that mark is recorded. dm-log-writes
# logs a write only once a flush after it has completed, so the log up to a
# mark is what a device that loses its volatile cache would hold after a
# power cut there. Then the map is killed -9, and for each mark the three
# devices are replayed into fresh files (replay, a static Go build of
# test/vmtest/replay), the targets restarted on them and the volume mapped
# again: recovery must read back every acknowledged-and-flushed byte as it
# was at the mark.
# Needs nvstripe (--file BIN:/bin/nvstripe), replay (--file
# BIN:/bin/replay), dmsetup and the dm modules (lib/dm.sh) and
# lib/nvstripe.sh. Parameters: rounds (3: marks m1..m3, each replayed).
nvs=/bin/nvstripe
dev=/dev/nbd0
mb=64 # each namespace device, MiB
sectors=$((mb * 2048))
data_mb=8 # the part of the volume the rounds write
rounds=${rounds:-3}

. /vm/scenarios/lib/nvstripe.sh
. /vm/scenarios/lib/dm.sh

dm_load

step "three log-writes devices over loop devices, as the targets' ns1"
for i in 1 2 3; do
	eval "D$i=\$(dm_loop /tmp/d$i.img $mb)"
	eval "G$i=\$(dm_loop /tmp/log$i.img $((mb * 2)))"
	eval "dm_create lw$i \"0 $sectors log-writes \$D$i \$G$i\""
	mkdir -p /tmp/t$i
	ln -s /dev/mapper/lw$i /tmp/t$i/ns1.img
done

# mark NAME: the same mark in the three logs, with the devices suspended
# (IO in flight completes first, new IO waits) so that the marks cut the
# three logs at one point.
mark() {
	for i in 1 2 3; do dmsetup suspend --noudevsync lw$i || fail "suspend lw$i"; done
	for i in 1 2 3; do dmsetup message lw$i 0 mark "$1" || fail "mark $1 on lw$i"; done
	for i in 1 2 3; do dmsetup resume --noudevsync lw$i || fail "resume lw$i"; done
}

cluster_up ${mb}MiB v:32MiB

# map_v LOG: `nvstripe map v` on $dev in the background (MAP), retried
# while the volume is in use (the lease of a killed owner has not expired
# yet); any other failure fails the scenario.
map_v() {
	_tries=0
	while :; do
		$nvs map v --nbd $dev >"$1" 2>&1 &
		MAP=$!
		wait_for "grep -q 'serving: $dev' $1 || ! kill -0 $MAP" 120
		grep -q "serving: $dev" "$1" && break
		grep -q "in use" "$1" || fail "map failed: $(cat "$1")"
		_tries=$((_tries + 1))
		[ $_tries -lt 40 ] || fail "map did not start: $(cat "$1")"
		sleep 1
	done
	wait_bdev $dev 30 || fail "$dev has no size"
}

# put FILE MB_OFFSET: write FILE at MB_OFFSET MiB of the volume with
# O_DIRECT and flush it; the same into /tmp/want.
put() {
	dd if="$1" of=$dev bs=1M seek="$2" oflag=direct conv=notrunc,fsync 2>/tmp/put.err || fail "write: $(cat /tmp/put.err)"
	dd if="$1" of=/tmp/want bs=1M seek="$2" conv=notrunc 2>/dev/null
}

step "map v on $dev, $rounds rounds of flushed writes, each marked"
map_v /tmp/agent.log
: >/tmp/want
pattern_file /tmp/w.bin $data_mb
put /tmp/w.bin 0
r=1
while :; do
	mark m$r
	cp /tmp/want /tmp/want-m$r
	info "marked m$r sha=$(sha256sum </tmp/want-m$r | cut -c1-16)"
	[ $r -lt "$rounds" ] || break
	r=$((r + 1))
	pattern_file /tmp/w.bin 1
	put /tmp/w.bin $((r % data_mb))
	pattern_file /tmp/w.bin 1
	put /tmp/w.bin $(((r * 3) % data_mb))
done
# Writes after the last mark, flushed or not, must not reach any replay.
pattern_file /tmp/w.bin 2
dd if=/tmp/w.bin of=$dev bs=1M seek=1 oflag=direct conv=notrunc 2>/dev/null || fail "write after the last mark"

step "crash: kill -9 the map and the targets; close the logs"
kill -9 $MAP
wait $MAP 2>/dev/null
for i in 1 2 3; do
	eval "kill -9 \$T$i"
	eval "wait \$T$i" 2>/dev/null
done
for i in 1 2 3; do
	run dmsetup remove --noudevsync lw$i
	rm /tmp/t$i/ns1.img
	/bin/replay -log /tmp/log$i.img -list >/tmp/entries$i
	info "log lw$i entries=$(wc -l </tmp/entries$i) marks=$(grep -c MARK /tmp/entries$i) flushes=$(grep -c FLUSH /tmp/entries$i)"
done

r=1
while [ $r -le "$rounds" ]; do
	step "replay the three logs to m$r, targets on the images, map, check"
	for i in 1 2 3; do
		rm -f /tmp/r$i.img
		dd if=/dev/zero of=/tmp/r$i.img bs=1M count=0 seek=$mb 2>/dev/null
		run /bin/replay -log /tmp/log$i.img -replay /tmp/r$i.img -end-mark m$r
		ln -sf /tmp/r$i.img /tmp/t$i/ns1.img
		$nvs target serve --dir /tmp/t$i --listen 127.0.0.1:442$i --nqn nqn.2026-11.io.example:t$i \
			--ns ns1:${mb}MiB --allow-host any >/tmp/t$i-m$r.log 2>&1 &
		eval "T$i=\$!"
	done
	map_v /tmp/map-m$r.log
	if ! dd if=$dev of=/tmp/got bs=1M count=$data_mb iflag=direct 2>/tmp/check.err; then
		cat /tmp/map-m$r.log
		fail "m$r: reading the replayed volume failed: $(cat /tmp/check.err)"
	fi
	if ! cmp /tmp/got /tmp/want-m$r; then
		cat /tmp/map-m$r.log
		fail "m$r: the replayed volume lost acknowledged-and-flushed data"
	fi
	info "replayed m$r right-data sha=$(sha256sum </tmp/got | cut -c1-16)"
	grep -i -E 'recover|resync|dirty|write log' /tmp/map-m$r.log | head -n 5
	kill -TERM $MAP
	wait $MAP
	for i in 1 2 3; do
		eval "kill \$T$i"
		eval "wait \$T$i" 2>/dev/null
	done
	r=$((r + 1))
done
info "dm-log-writes replays=$rounds"
