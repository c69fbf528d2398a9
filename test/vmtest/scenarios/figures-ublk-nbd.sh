# vm-modules: nbd
# figures-ublk-nbd: the same in-memory device served by package ublk
# (/dev/ublkb0) and by package nbd through the kernel's nbd client
# (/dev/nbd0 on 127.0.0.1), the same dd job against each, interleaved:
# server CPU time per GiB (utime+stime of the server process) and, with
# strace in the guest, the server's system calls per request (the job is
# fio's when fio is copied in, dd's otherwise). Behaviour
# figures under emulation, not speed. Run by test/vmtest/figures.sh.
# Parameters: mb (128: MiB written then read per round), rounds (3).
mb=${mb:-128}
rounds=${rounds:-3}
T=/ublk.test
reqs=$((mb * 16 * 2)) # 64 KiB O_DIRECT requests per job: writes then reads

run insmod /lib/ublk_drv.ko
wait_for "[ -e /dev/ublk-control ]" 10 || fail "no /dev/ublk-control"
ip link set lo up 2>/dev/null

start() { # start NAME [KEY=VALUE...]: a TestKernelServe in the background
	name=$1
	shift
	rm -f "/tmp/$name.ready"
	env UBLK_VM_SERVE="/tmp/$name.ready" UBLK_VM_SIZE_MB=$mb "$@" \
		$T -test.run '^TestKernelServe$' -test.count=1 >"/tmp/$name.log" 2>&1 &
	eval "${name}_pid=\$!"
	wait_for "[ -s /tmp/$name.ready ]" 120 || { cat "/tmp/$name.log"; fail "$name server did not come up"; }
}
start ublk
start nbd UBLK_VM_NBD=127.0.0.1:10809
run nbd-client 127.0.0.1 10809 /dev/nbd0 -N vm -b 4096
wait_bdev /dev/nbd0 20 || fail "/dev/nbd0 has no size"
wait_bdev /dev/ublkb0 20 || fail "/dev/ublkb0 has no size"

# job DEV: mb MiB written then read in 64 KiB O_DIRECT requests: with fio
# (libaio, 16 in flight) when the guest has it, else with dd (one at a time).
if command -v fio >/dev/null; then
	jobname="fio libaio iodepth=16 bs=64k write+read"
	job() {
		for rw in write read; do
			fio --name=fig --filename="$1" --rw=$rw --bs=64k --size=${mb}M --direct=1 --ioengine=libaio \
				--iodepth=16 --thread >/tmp/fio.$rw.log 2>&1 || { cat /tmp/fio.$rw.log; fail "fio $rw on $1"; }
		done
	}
else
	jobname="dd bs=64k write+read"
	job() {
		dd if=/dev/zero of="$1" bs=64k count=$((mb * 16)) oflag=direct 2>/dev/null || fail "dd write to $1"
		dd if="$1" of=/dev/null bs=64k count=$((mb * 16)) iflag=direct 2>/dev/null || fail "dd read from $1"
	}
fi
info "figure job=\"$jobname\" mb=$mb rounds=$rounds"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=100

r=1
while [ $r -le "$rounds" ]; do
	for name in ublk nbd; do
		dev=/dev/ublkb0
		[ $name = nbd ] && dev=/dev/nbd0
		eval "pid=\$${name}_pid"
		t0=$(ticks "$pid")
		job "$dev"
		t1=$(ticks "$pid")
		info "figure round=$r server=$name cpu_ms=$(((t1 - t0) * 1000 / hz)) cpu_ms_per_gib=$(((t1 - t0) * 1000 / hz * 1024 / (mb * 2))) requests=$reqs"
	done
	r=$((r + 1))
done

if command -v strace >/dev/null; then
	for name in ublk nbd; do
		dev=/dev/ublkb0
		[ $name = nbd ] && dev=/dev/nbd0
		eval "pid=\$${name}_pid"
		strace -c -f -p "$pid" -o "/tmp/strace.$name" 2>/dev/null &
		sp=$!
		sleep 2
		job "$dev"
		kill -INT $sp
		wait $sp
		calls=$(awk '$NF == "total" {print $(NF-2)}' "/tmp/strace.$name")
		info "figure strace server=$name syscalls=$calls requests=$reqs per_request_x100=$((calls * 100 / reqs))"
		cat "/tmp/strace.$name"
	done
else
	info "no strace in the guest: system call counts skipped"
fi

run nbd-client -d /dev/nbd0
kill -TERM "$nbd_pid" "$ublk_pid"
wait "$ublk_pid" || true
