#!/usr/bin/env bash
# local-cluster.sh: a six-host nvstripe cluster on one machine, by hand.
#
# It starts etcd and six userspace NVMe/TCP targets (t1..t6, each a host of
# its own and so a failure domain of its own: a k+m volume needs k+m
# domains), registers them, creates a 4+2 volume and maps it over NBD. With
# CHECK=1 it fills part of the volume, reads it back, compares, and stops
# everything; otherwise it prints the NBD URL and serves until Ctrl-C.
#
# Needs: the nvstripe binary (NVSTRIPE, default `nvstripe` on PATH, e.g.
# `go build -o /usr/local/bin/nvstripe ./cmd/nvstripe`); for CHECK=1 also
# nbdcopy (Debian: libnbd-bin).
#
# Environment:
#   NVSTRIPE   the binary                          (default: nvstripe)
#   DIR        state: etcd data, namespace files    (default: a new temp dir)
#   PORT_BASE  targets on PORT_BASE..PORT_BASE+5, NBD on +10, etcd on +20/+21;
#              0: ports the kernel picks, read back (default: 14420)
#   NS_SIZE    size of each target's namespace      (default: 256MiB)
#   VOL_SIZE   size of the volume                   (default: 256MiB)
#   CHECK      1: write, read back, compare, stop   (default: serve)
#
# The targets accept any host NQN (--allow-host any): a demo. On real hosts
# allow each node's `nvstripe host-identity` instead.
set -euo pipefail

NVSTRIPE=${NVSTRIPE:-nvstripe}
DIR=${DIR:-$(mktemp -d /tmp/nvstripe-local.XXXXXX)}
PORT_BASE=${PORT_BASE:-14420}
NS_SIZE=${NS_SIZE:-256MiB}
VOL_SIZE=${VOL_SIZE:-256MiB}
CHECK=${CHECK:-0}
NQN=nqn.2026-12.io.nvstripe.local

pids=()
cleanup() {
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# port N prints the address for offset N from PORT_BASE (127.0.0.1:0 when 0).
port() {
	if [ "$PORT_BASE" = 0 ]; then echo 127.0.0.1:0; else echo "127.0.0.1:$((PORT_BASE + $1))"; fi
}

# start LOG CMD...: runs CMD in the background, its output in LOG.
start() {
	local log=$1
	shift
	"$@" >"$log" 2>&1 &
	pids+=($!)
}

# await LOG REGEX: waits (30 s at most) for a line of LOG matching REGEX and
# prints its first match; fails with the log when the process died or time ran out.
await() {
	local log=$1 re=$2 pid=${pids[-1]}
	for _ in $(seq 300); do
		if grep -Eo "$re" "$log" 2>/dev/null | head -n1 | grep .; then return 0; fi
		if ! kill -0 "$pid" 2>/dev/null; then break; fi
		sleep 0.1
	done
	echo "local-cluster: no line matching '$re' in $log:" >&2
	cat "$log" >&2
	return 1
}

mkdir -p "$DIR"
echo "state in $DIR"

start "$DIR/etcd.log" "$NVSTRIPE" etcd --dir "$DIR/etcd" --listen "$(port 20)" --peer-listen "$(port 21)"
ETCD=$(await "$DIR/etcd.log" 'etcd ready: [^ ]+' | sed 's/etcd ready: //')
export NVSTRIPE_ETCD=$ETCD
echo "etcd at $ETCD"

"$NVSTRIPE" cluster init --slot-size 16MiB
for i in 1 2 3 4 5 6; do
	start "$DIR/t$i.log" "$NVSTRIPE" target serve --dir "$DIR/t$i" --listen "$(port $((i - 1)))" \
		--nqn "$NQN:t$i" --ns "d0:$NS_SIZE" --allow-host any
	addr=$(await "$DIR/t$i.log" 'listener 0: [^ ]+' | sed 's/listener 0: //')
	"$NVSTRIPE" host add "t$i"
	"$NVSTRIPE" ns add --host "t$i" --nqn "$NQN:t$i" --nsid 1 --path "tcp://$addr"
done
"$NVSTRIPE" volume create ckpt --size "$VOL_SIZE" --k 4 --m 2
"$NVSTRIPE" df

start "$DIR/map.log" "$NVSTRIPE" map ckpt --nbd-listen "$(port 10)"
URL=$(await "$DIR/map.log" 'serving: [^ ]+' | sed 's/serving: //')
echo "ready: $URL"

if [ "$CHECK" != 1 ]; then
	echo "serving until Ctrl-C (nbdinfo $URL; nvstripe admin status with NVSTRIPE_ETCD=$ETCD)"
	wait "${pids[-1]}"
	exit
fi
head -c 16M /dev/urandom >"$DIR/fill"
nbdcopy "$DIR/fill" "$URL"          # a sized source: nbdcopy stops at its end
nbdcopy "$URL" "$DIR/back"
cmp -n $((16 << 20)) "$DIR/fill" "$DIR/back"
"$NVSTRIPE" ns ls
echo "check passed: 16 MiB written and read back through a 4+2 volume over six targets"
