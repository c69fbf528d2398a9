# vm-modules: nbd ext4 crc32c-intel crc32c_generic
# unmap: a whole nvstripe cluster in the guest; a foreground map started
# with its flags before the verb (`nvstripe --etcd 127.0.0.1:2379 map v`,
# as a systemd unit may write it) on a kernel nbd device is unmapped by
# `nvstripe unmap /dev/nbd0`, then, mapped again, by `unmap v`; a map
# serving --nbd-listen is unmapped by `unmap v`. Each time the map process
# exits 0, the device is back at size 0 and `ls` lists the mapping without
# a word about the missing agent. A volume mapped nowhere is "not mapped"
# with a non-zero exit. With ublk=1 (ublk_drv.ko shipped as
# /lib/ublk_drv.ko, built by build-ublk-module.sh) also `map v --ublk`,
# unmapped by `unmap /dev/ublkb0` and, mapped again, by `unmap v`.
# Needs the static binary (run-vm.sh --file BIN:/bin/nvstripe) and
# lib/nvstripe.sh (see there).
nvs=/bin/nvstripe
dev=/dev/nbd0

. /vm/scenarios/lib/nvstripe.sh

t0=$(now_s)
cluster_up 64MiB v:64MiB

# fg_map LOG ARGS...: a foreground map with the flags before the verb, in
# the background; MAP is its pid.
fg_map() {
	_log=$1
	shift
	$nvs --etcd 127.0.0.1:2379 map "$@" >"$_log" 2>&1 &
	MAP=$!
}

# unmap_by NAME SERVED: unmap NAME, which SERVED (a device or URL) serves;
# the map process must say unmapped and exit 0.
unmap_by() {
	$nvs ls >/tmp/ls.out 2>/tmp/ls.err || fail "ls: $(cat /tmp/ls.out /tmp/ls.err)"
	grep -q "^$2 *v " /tmp/ls.out || fail "ls does not list v on $2: $(cat /tmp/ls.out)"
	[ -s /tmp/ls.err ] && fail "ls warned: $(cat /tmp/ls.err)"
	$nvs unmap "$1" >/tmp/unmap.out 2>&1 || fail "unmap $1: $(cat /tmp/unmap.out)"
	grep -q "unmapped v from $2" /tmp/unmap.out || fail "unmap $1 said: $(cat /tmp/unmap.out)"
	wait $MAP || fail "map process exited $? after unmap $1"
}

n=0
for by in $dev v; do
	n=$((n + 1))
	step "map v on $dev (flags before the verb), unmap $by"
	fg_map /tmp/map$n.log v --nbd $dev
	wait_for "grep -q 'serving: $dev' /tmp/map$n.log" 120 || fail "map printed no device: $(cat /tmp/map$n.log)"
	wait_bdev $dev 30 || fail "$dev has no size"
	unmap_by $by $dev
	wait_for "[ \$(cat /sys/block/nbd0/size) -eq 0 ] && [ ! -e /sys/block/nbd0/pid ]" 30 || fail "$dev still sized or connected after unmap $by"
	info "unmapped-by-$by size=$(cat /sys/block/nbd0/size)"
done

if [ "${ublk:-0}" = 1 ]; then
	ublk_load
	for by in /dev/ublkb0 v; do
		n=$((n + 1))
		step "map v --ublk (flags before the verb), unmap $by"
		fg_map /tmp/map$n.log v --ublk
		wait_for "grep -q 'serving: /dev/ublkb0' /tmp/map$n.log" 120 || fail "map printed no device: $(cat /tmp/map$n.log)"
		unmap_by $by /dev/ublkb0
		wait_for "[ ! -e /dev/ublkb0 ]" 30 || fail "/dev/ublkb0 still exists after unmap $by"
		info "unmapped-ublk-by-$by"
	done
fi

step "map v --nbd-listen, unmap v"
fg_map /tmp/map-listen.log v --nbd-listen 127.0.0.1:10809
wait_for "grep -q 'serving: nbd://' /tmp/map-listen.log" 120 || fail "map printed no URL: $(cat /tmp/map-listen.log)"
url=$(sed -n 's/^serving: \(nbd:[^ ]*\).*/\1/p' /tmp/map-listen.log)
unmap_by v "$url"
info "unmapped-listen url=$url"

step "unmap of a volume mapped nowhere"
if $nvs unmap v >/tmp/unmap-none.out 2>&1; then
	fail "unmap of an unmapped volume succeeded: $(cat /tmp/unmap-none.out)"
fi
grep -q "not mapped" /tmp/unmap-none.out || fail "unmap of an unmapped volume said: $(cat /tmp/unmap-none.out)"
info "not-mapped: $(head -1 /tmp/unmap-none.out) total_s=$(($(now_s) - t0))"
