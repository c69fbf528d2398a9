#!/usr/bin/env bash
# test/bench/nbd.sh: nvstripe's NBD server against nbdkit's memory plugin, same
# clients (fio's nbd engine and nbdcopy), side by side, one table.
# It measures the NBD server over one process's volume; the whole stack as
# users run it (etcd, six `target serve` processes, `map`), with CPU time per
# process and latency percentiles, is `make bench-stack` (test/bench/stack).
#
# Usage: test/bench/nbd.sh [SERVE_CMD...]
#   SERVE_CMD is a command that serves an export over NBD on 127.0.0.1:$PORT
#   and prints "ready: nbd://..." once listening (default: the nbd package's
#   test/bench/nbdbench: a 4+2 volume over in-memory namespaces). The
#   command may use $PORT and $SIZE, e.g.
#     test/bench/nbd.sh ./nvstripe map vol --nbd-listen 127.0.0.1:\$PORT
# Environment: SIZE (default 1G), RUNTIME seconds per fio job (default 5),
#   BASELINE memory|file (nbdkit plugin to compare with; default memory; use
#   file for the full stack: test/bench/nbd.sh ./nvstripe demo --nbd-listen
#   127.0.0.1:\$PORT --size \$SIZE with EXPORT=demo),
#   FILE_OPTS (extra nbdkit file plugin parameters for BASELINE=file; our
#   targets use O_DIRECT while nbdkit file uses the page cache, so
#   FILE_OPTS=cache=none gives the closer comparison),
#   ROUNDS (default 3), PORT (default 10819; nbdkit gets PORT+1), EXPORT
#   (default bench), PIN (default 0; 1 runs the clients on CPU 0 and both
#   servers on the other CPUs, on a machine with 2 or more), TLS (default
#   0; 1 compares nbdbench in plain text with nbdbench requiring TLS, its
#   clients on nbds:// URIs, instead of nvstripe with nbdkit: what TLS
#   costs; certificates made with openssl, TLS 1.3 as GnuTLS and Go agree).
# Why pin: fio's nbd engine is one thread, and on a small machine it is the
# bottleneck. Unpinned, the result also depends on how the scheduler places
# the client next to each server's threads: nbdkit's own write figure moved
# by 20 % between runs on a 2-CPU VM. Pinned, each server has the same CPUs
# to itself and the client never waits for them, so the ratio compares the
# servers alone. Both servers are pinned alike.
# Each job runs ROUNDS times, alternating between the two servers so that
# load from other processes hits both alike; the table shows the median.
# Needs fio, nbdkit, nbdcopy (and openssl for TLS=1). Figures are only comparable within one run.
set -euo pipefail

SIZE=${SIZE:-1G}
RUNTIME=${RUNTIME:-5}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-10819}
KPORT=$((PORT + 1))
EXPORT=${EXPORT:-bench}
export SIZE PORT EXPORT
cd "$(dirname "$0")/.."

CLIENT=() SERVER=()
if [ "${PIN:-0}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
	CLIENT=(taskset -c 0) SERVER=(taskset -c "1-$(($(nproc) - 1))")
fi

for tool in fio nbdkit nbdcopy; do
	command -v "$tool" >/dev/null || { echo "test/bench/nbd.sh: $tool not installed" >&2; exit 2; }
done

work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

# start NAME PORT CMD...: run CMD in the background, wait for it to accept
# NBD (at URI[NAME] when set, else nbd://127.0.0.1:PORT).
start() {
	local name=$1 port=$2
	shift 2
	"${SERVER[@]}" "$@" >"$work/$name.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 300); do
		if nbdinfo --size "${URI[$name]:-nbd://127.0.0.1:$port/$EXPORT}" >/dev/null 2>&1 ||
			nbdinfo --size "nbd://127.0.0.1:$port/" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	echo "test/bench/nbd.sh: $name did not start:" >&2
	cat "$work/$name.log" >&2
	exit 1
}

A=nvstripe B=nbdkit
declare -A URI=([nvstripe]="nbd://127.0.0.1:$PORT/$EXPORT" [nbdkit]="nbd://127.0.0.1:$KPORT/$EXPORT")
if [ "${TLS:-0}" = 1 ]; then
	# What TLS costs: the same server in plain text and over TLS.
	command -v openssl >/dev/null || { echo "test/bench/nbd.sh: openssl not installed (TLS=1)" >&2; exit 2; }
	A=plain B=tls
	mkdir "$work/server"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench-ca \
		-keyout "$work/ca-key.pem" -out "$work/server/ca-cert.pem" 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
		-keyout "$work/server/server-key.pem" -out "$work/server.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$work/ext"
	openssl x509 -req -in "$work/server.csr" -CA "$work/server/ca-cert.pem" -CAkey "$work/ca-key.pem" -CAcreateserial \
		-days 1 -extfile "$work/ext" -out "$work/server/server-cert.pem" 2>/dev/null
	# fio's nbd engine takes no tls-certificates= in its URI (it does not
	# allow local files): every client finds the CA in libnbd's default
	# directory, $HOME/.pki/libnbd.
	mkdir -p "$work/home/.pki/libnbd"
	cp "$work/server/ca-cert.pem" "$work/home/.pki/libnbd/"
	go build -o "$work/nbdbench" ./test/bench/nbdbench # before HOME moves (Go's caches live there)
	export HOME="$work/home"
	URI=([plain]="nbd://127.0.0.1:$PORT/$EXPORT" [tls]="nbds://127.0.0.1:$KPORT/$EXPORT")
	start plain "$PORT" "$work/nbdbench" -listen "127.0.0.1:$PORT" -size "$SIZE" -export "$EXPORT" ${NBDBENCH_OPTS:-}
	start tls "$KPORT" "$work/nbdbench" -listen "127.0.0.1:$KPORT" -size "$SIZE" -export "$EXPORT" \
		-tls-certificates "$work/server" ${NBDBENCH_OPTS:-}
elif [ $# -gt 0 ]; then
	start nvstripe "$PORT" bash -c "$*"
else
	go build -o "$work/nbdbench" ./test/bench/nbdbench
	start nvstripe "$PORT" "$work/nbdbench" -listen "127.0.0.1:$PORT" -size "$SIZE" -export "$EXPORT"
fi
if [ "$B" = tls ]; then
	:
elif [ "${BASELINE:-memory}" = file ]; then
	# The full-stack comparison: nbdkit serving one file on the same disk.
	truncate -s "$SIZE" "$work/baseline.img"
	start nbdkit "$KPORT" nbdkit -f -i 127.0.0.1 -p "$KPORT" -e "$EXPORT" file "$work/baseline.img" ${FILE_OPTS:-}
else
	start nbdkit "$KPORT" nbdkit -f -i 127.0.0.1 -p "$KPORT" -e "$EXPORT" memory "$SIZE"
fi

declare -A RESULT

# fio_job TARGET RW BS QD [time_based]: prints "MiB/s IOPS".
fio_job() {
	local target=$1 rw=$2 bs=$3 qd=$4 out="$work/fio.json"
	local timing=(--time_based "--runtime=$RUNTIME")
	[ "${5:-}" = once ] && timing=()
	"${CLIENT[@]}" fio --name=bench --ioengine=nbd --uri="${URI[$target]}" --rw="$rw" --bs="$bs" \
		--iodepth="$qd" --size="$SIZE" "${timing[@]}" --output-format=json \
		--output="$out" >/dev/null 2>&1
	python3 - "$out" "$rw" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
side = "write" if "write" in sys.argv[2] else "read"
print("%.0f %.0f" % (job[side]["bw"] / 1024, job[side]["iops"]))
PY
}

# nbdcopy_job TARGET read|write: prints MiB/s for a copy of SIZE.
nbdcopy_job() {
	local target=$1 dir=$2 t0 t1 bytes
	bytes=$(nbdinfo --size "${URI[$target]}")
	t0=$(date +%s.%N)
	if [ "$dir" = read ]; then
		"${CLIENT[@]}" nbdcopy --no-extents "${URI[$target]}" null:
	else
		"${CLIENT[@]}" nbdcopy --flush "$src" "${URI[$target]}"
	fi
	t1=$(date +%s.%N)
	python3 -c "print('%.0f' % ($bytes / 1048576 / ($t1 - $t0)))"
}

# The write source for nbdcopy lives in memory.
src=/dev/shm/nvstripe-bench.$$
head -c "$(nbdinfo --size "${URI[$B]}")" /dev/urandom >"$src"
trap 'rm -f "$src"; cleanup' EXIT

for target in "$A" "$B"; do
	# Fill once: first writes allocate (nbdkit memory runs at 0.2 GB/s then).
	fio_job "$target" write 1M 16 once >/dev/null
done

# median: the middle line (by first field) of its input.
median() { sort -n | awk '{ l[NR] = $0 } END { print l[int((NR + 1) / 2)] }'; }

declare -A RUNS
for round in $(seq 1 "$ROUNDS"); do
	for target in "$A" "$B"; do
		RUNS[$target,seqread]+="$(fio_job "$target" read 1M 16)"$'\n'
		RUNS[$target,seqwrite]+="$(fio_job "$target" write 1M 16)"$'\n'
		RUNS[$target,randread]+="$(fio_job "$target" randread 4k 32)"$'\n'
		RUNS[$target,copyread]+="$(nbdcopy_job "$target" read)"$'\n'
		RUNS[$target,copywrite]+="$(nbdcopy_job "$target" write)"$'\n'
	done
done
for key in "${!RUNS[@]}"; do
	RESULT[$key]=$(printf '%s' "${RUNS[$key]}" | sed '/^$/d' | median)
done

row() { # row LABEL KEY FIELD(1=MiB/s,2=IOPS) UNIT
	local a b
	a=$(echo "${RESULT[$A,$2]}" | cut -d' ' -f"$3")
	b=$(echo "${RESULT[$B,$2]}" | cut -d' ' -f"$3")
	printf "%-34s %12s %12s %7s\n" "$1" "$a $4" "$b $4" \
		"$(python3 -c "print('%.0f%%' % (100.0 * $a / $b if $b else 0))")"
}
echo
echo "size $SIZE, median of $ROUNDS rounds, fio ${RUNTIME}s per job, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), code $(git describe --always --dirty 2>/dev/null || echo unknown)"
if [ ${#CLIENT[@]} -gt 0 ]; then
	echo "clients pinned to CPU 0, servers to CPUs ${SERVER[2]} (PIN=1)"
else
	echo "no pinning (PIN=0)"
fi
printf "%-34s %12s %12s %7s\n" "job" "$A" "$B" "ratio"
row "fio seq read 1MiB QD16" seqread 1 MiB/s
row "fio seq write 1MiB QD16" seqwrite 1 MiB/s
row "fio rand read 4KiB QD32 (IOPS)" randread 2 ""
row "nbdcopy read -> null:" copyread 1 MiB/s
row "nbdcopy write (from /dev/shm)" copywrite 1 MiB/s
