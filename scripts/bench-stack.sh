#!/usr/bin/env bash
# scripts/bench-stack.sh: `make bench-stack`. Builds the nvstripe binary and
# test/bench/stack, then runs the full-stack benchmark (docs/performance.md):
# etcd, six `target serve` processes on tmpfs, a 4+2 volume with the
# defaults mapped by `nvstripe map --nbd-listen`, fio beside nbdkit memory.
#
# Environment (make variables on make's command line reach it too):
#   SIZE     volume and nbdkit export size (default 1GiB)
#   RUNTIME  seconds per fio job (default 5)
#   ROUNDS   rounds of every job, interleaved between the servers (default 3)
#   JOBS     only the jobs whose names match this regular expression (e.g. QD1)
#   PROFILE  1: CPU profiles of the map and one target per job (first round)
#   NOISY    1: the noisy-neighbour table instead (victim 4KiB QD1 reads,
#            neighbour 1MiB QD64 writes on the same targets)
#   NEIGHBOUR_FLAGS  with NOISY=1: `volume create` flags of a third, limited
#            neighbour, e.g. "--qos-iops 500"
#   OUTPUT   text (default) or json
#   OUT      output folder (default test/bench/out/stack-TIME)
# Extra arguments go to test/bench/stack (see `go run ./test/bench/stack -h`).
# Needs fio and nbdkit. The defaults take about 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
"$GO" build -o "$bin/nvstripe" ./cmd/nvstripe
"$GO" build -o "$bin/bench-stack" ./test/bench/stack
"$GO" build -o "$bin/floor" ./test/bench/floor
args=(-nvstripe "$bin/nvstripe" -floor "$bin/floor" -size "${SIZE:-1GiB}" -runtime "${RUNTIME:-5}" -rounds "${ROUNDS:-3}" -o "${OUTPUT:-text}")
[ -n "${OUT:-}" ] && args+=(-out "$OUT")
[ -n "${JOBS:-}" ] && args+=(-jobs "$JOBS")
[ "${PROFILE:-0}" = 1 ] && args+=(-profile)
[ "${NOISY:-0}" = 1 ] && args+=(-noisy -neighbour-flags "${NEIGHBOUR_FLAGS:-}")
"$bin/bench-stack" "${args[@]}" "$@"
