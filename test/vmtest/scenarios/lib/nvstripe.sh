# lib/nvstripe.sh: steps the nvstripe scenarios share, sourced after the
# harness's /vm/lib.sh (step, run, wait_for, fail, info, pattern_file).
# runScenario (vm_test.go) ships every scenarios/lib/*.sh into the guest
# at /vm/scenarios/lib/; by hand: run-vm.sh --file
# test/vmtest/scenarios/lib/nvstripe.sh:/vm/scenarios/lib/nvstripe.sh ...

# ublk_load: insmod /lib/ublk_drv.ko (shipped with --file) and wait for
# /dev/ublk-control.
ublk_load() {
	step "insmod /lib/ublk_drv.ko"
	run insmod /lib/ublk_drv.ko
	wait_for "[ -e /dev/ublk-control ]" 10 || fail "no /dev/ublk-control"
}

# cluster_up NS_SIZE [VOLUME:SIZE...]: a whole cluster on the guest's
# loopback with $nvs (the nvstripe binary): embedded etcd in /tmp/etcd
# (log /tmp/etcd.log), three `target serve` t1..t3 on 127.0.0.1:4421-4423
# (pids T1..T3, logs /tmp/tN.log), each with one namespace ns1 of NS_SIZE,
# the cluster initialised (16 MiB slots), hosts t1..t3 in racks r1..r3 with
# their namespaces, and a 2+1 volume of each VOLUME:SIZE (created with the
# extra flags in $volume_flags, e.g. volume_flags=--write-log=none).
cluster_up() {
	_ns_size=$1
	shift
	_t0=$(now_s)
	step "cluster: etcd, three targets (namespaces of $_ns_size), 2+1 volumes $*"
	ip link set lo up 2>/dev/null
	mkdir -p /tmp/etcd /tmp/t1 /tmp/t2 /tmp/t3
	$nvs etcd --dir /tmp/etcd >/tmp/etcd.log 2>&1 &
	for _i in 1 2 3; do
		$nvs target serve --dir /tmp/t$_i --listen 127.0.0.1:442$_i --nqn nqn.2026-11.io.example:t$_i \
			--ns ns1:$_ns_size --allow-host any >/tmp/t$_i.log 2>&1 &
		eval "T$_i=\$!"
	done
	wait_for "$nvs cluster init --slot-size 16MiB --etcd-timeout 60s" 120 || fail "cluster init: $(cat /tmp/etcd.log)"
	for _i in 1 2 3; do
		run $nvs host add t$_i --label rack=r$_i
		wait_for "$nvs ns add --host t$_i --nqn nqn.2026-11.io.example:t$_i --nsid 1 --path tcp://127.0.0.1:442$_i" 60 ||
			fail "ns add t$_i: $(cat /tmp/t$_i.log)"
	done
	for _v in "$@"; do
		run $nvs volume create "${_v%%:*}" --size "${_v#*:}" --k 2 --m 1 $volume_flags
	done
	info "cluster-ready s=$(($(now_s) - _t0))"
}

# fill_files DIR FILE_MB [COUNT]: DIR/big.bin of FILE_MB random MiB and
# COUNT (20) small files DIR/small-N.txt, their sha256 sums in /tmp/sums
# (for sha256sum -c from DIR), then sync.
fill_files() {
	pattern_file "$1/big.bin" "$2"
	_i=0
	while [ $_i -lt "${3:-20}" ]; do
		echo "file $_i" >"$1/small-$_i.txt"
		_i=$((_i + 1))
	done
	(cd "$1" && find . -type f | sort | xargs sha256sum) >/tmp/sums
	run sync
}

# Per-step durations: step (the harness's, redefined here) also prints how
# long the step before it took as "@@INFO step-s N NAME" (the Go test logs
# every @@INFO line), and on exit, pass or fail, the last step's, then the
# tail of the agent's log (/tmp/agent.log, when there is one) and the
# kernel's nbd/ublk lines, so that a slow or failed run shows where the
# time went.
_nvs_step= _nvs_step_t=
step() {
	_nvs_step_end
	_nvs_step=$(echo "$*" | tr -s ' \t' '__')
	_nvs_step_t=$(cut -d' ' -f1 /proc/uptime)
	echo "[$scenario] --- $* (t=$_nvs_step_t)"
}
_nvs_step_end() {
	[ -n "$_nvs_step" ] || return 0
	info "step-s $(awk -v a="$_nvs_step_t" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN {printf "%.1f", b - a}') $_nvs_step"
	_nvs_step=
}
_nvs_exit() {
	_rc=$?
	_nvs_step_end
	if [ -s /tmp/agent.log ]; then
		say "agent log (last 150 lines):"
		tail -n 150 /tmp/agent.log
	fi
	say "kernel nbd/ublk messages:"
	dmesg | grep -i -E 'nbd|ublk|block' | tail -n 60
	return $_rc
}
trap _nvs_exit EXIT

# watch_stuck DEV: in the background, every 15 s, print the kernel's
# requests on block device DEV (nbd0) that were in flight 15 s before as
# well (blk-mq debugfs hctx*/busy: the op and flags of each), so that a
# request the server never answers is named while it hangs rather than
# only when the kernel's timeout ends it.
watch_stuck() {
	mount -t debugfs none /sys/kernel/debug 2>/dev/null
	ls /sys/kernel/debug/block/"$1"/hctx*/busy >/dev/null 2>&1 || {
		say "no blk-mq debugfs for $1: not watching for stuck requests"
		return 0
	}
	(
		_prev=
		while sleep 15; do
			_cur=$(cat /sys/kernel/debug/block/"$1"/hctx*/busy 2>/dev/null)
			echo "$_cur" | while read -r _l; do
				[ -n "$_l" ] && echo "$_prev" | grep -q -F -x -- "$_l" && say "in flight over 15 s on $1: $_l"
			done | head -n 8
			_prev=$_cur
		done
	) &
}
