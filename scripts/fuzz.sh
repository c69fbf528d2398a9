#!/usr/bin/env bash
# fuzz.sh: run every Go fuzz target of the module for a time budget each, one
# at a time (or FUZZ_JOBS side by side), and print a table (target, time, execs, new interesting inputs,
# crashers). `make fuzz` calls it; CI runs only the seed corpora (plain
# `go test` does).
#
# Targets are found by script (every `func FuzzX(f *testing.F)` in a
# *_test.go file), so a new one is included without a change here.
#
# What is kept:
#   - New interesting inputs stay in Go's fuzz cache ($(go env GOCACHE)/fuzz,
#     per package and target), which the next run starts from; the table
#     counts the files this run added there. `go clean -fuzzcache` drops them.
#   - A crasher is written by `go test` to the package's testdata/fuzz/FuzzX/,
#     so it becomes a seed that every later plain `go test` runs (fix the bug,
#     then commit the file). The table counts the files this run added there
#     and lists their paths.
#
# Environment:
#   FUZZTIME      budget per target (a duration, or Nx for N runs); default 10m
#   FUZZ_RUN      regexp over target names (FuzzX) to narrow the run; default all
#   FUZZ_JOBS     targets fuzzed side by side; default 1. Each still gets the whole
#                 FUZZTIME; the run takes about targets x FUZZTIME / FUZZ_JOBS.
#   FUZZ_PARALLEL fuzzing workers per target (go test -parallel); default: Go's
#                 (GOMAXPROCS), or the CPUs divided among FUZZ_JOBS (at least 1)
#   FUZZ_MINIMIZETIME  budget to minimize each new input (go test -fuzzminimizetime);
#                 default 10s (Go's 60s stalls targets with inputs of kilobytes: no
#                 execs are counted while a worker minimizes)
#   FUZZ_LOGS     folder for each target's log; default a new one under ${TMPDIR:-/tmp}
#   FUZZ_SUMMARY  file to write the totals to, one line "targets=N execs=N new=N crashers=N failed=N"
#
# Exit status: 0 when every target ran its budget with no crasher, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10m}
FUZZ_RUN=${FUZZ_RUN:-.}
FUZZ_MINIMIZETIME=${FUZZ_MINIMIZETIME:-10s}
FUZZ_LOGS=${FUZZ_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/nvstripe-fuzz.XXXXXX")}
mkdir -p "$FUZZ_LOGS"
cache="$($GO env GOCACHE)/fuzz"

# targets prints "DIR TARGET" for every fuzz target of the module, sorted.
targets() {
	grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
		grep -v '/testdata/' |
		sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' |
		sort -u
}

# count prints how many files the folder holds (0 when it does not exist).
count() {
	if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi
}

FUZZ_JOBS=${FUZZ_JOBS:-1}
[[ "$FUZZ_JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: FUZZ_JOBS=$FUZZ_JOBS: want a whole number of targets at once, 1 or more" >&2; exit 2; }
if [ -z "${FUZZ_PARALLEL:-}" ] && [ "$FUZZ_JOBS" -gt 1 ]; then
	FUZZ_PARALLEL=$(($(nproc) / FUZZ_JOBS))
	[ "$FUZZ_PARALLEL" -ge 1 ] || FUZZ_PARALLEL=1
fi
rowdir="$FUZZ_LOGS/rows"
mkdir -p "$rowdir"

# fuzz_one fuzzes one target for FUZZTIME and writes its table row
# ("target time execs new crashers result") to $rowdir/SEQ.
fuzz_one() {
	local seq=$1 dir=$2 target=$3 pkg seeds corpus seeds_before corpus_before log start rc secs execs new crash result
	local args=()
	pkg=$($GO list "./$dir") || { echo "$dir.$target - 0 0 0 build-failed" >"$rowdir/$seq"; return; }
	seeds="$dir/testdata/fuzz/$target"
	corpus="$cache/$pkg/$target"
	seeds_before=$(count "$seeds")
	corpus_before=$(count "$corpus")
	log="$FUZZ_LOGS/$(echo "$dir" | tr / _)_$target.log"
	args=(test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZ_MINIMIZETIME")
	if [ -n "${FUZZ_PARALLEL:-}" ]; then args+=(-parallel "$FUZZ_PARALLEL"); fi
	echo "fuzz: $pkg $target for $FUZZTIME (log $log)"
	start=$(date +%s)
	$GO "${args[@]}" "./$dir" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	# The last progress line: "fuzz: elapsed: 1m0s, execs: 123 (2/sec), new interesting: 4 (total: 9)".
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
	execs=${execs:-0}
	new=$(($(count "$corpus") - corpus_before))
	crash=$(($(count "$seeds") - seeds_before))
	result=ok
	if [ "$crash" -gt 0 ]; then
		result=CRASHER
		grep -E 'Failing input written to|--- FAIL' "$log" | sed "s|^|    $target: |"
	elif [ "$rc" -ne 0 ]; then
		result=FAILED
		tail -20 "$log" | sed "s|^|    $target: |"
	fi
	echo "$dir.$target ${secs}s $execs $new $crash $result" >"$rowdir/$seq"
}

n=0
while read -r dir target; do
	[[ "$target" =~ $FUZZ_RUN ]] || continue
	n=$((n + 1))
	while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do wait -n; done
	fuzz_one "$(printf '%04d' "$n")" "$dir" "$target" &
done < <(targets)
wait

rows=()
total_execs=0 total_new=0 total_crash=0 failed=0
for f in "$rowdir"/*; do
	[ -e "$f" ] || continue
	read -r name secs execs new crash result <"$f"
	rows+=("$name $secs $execs $new $crash $result")
	[ "$result" = ok ] || failed=$((failed + 1))
	total_execs=$((total_execs + execs))
	total_new=$((total_new + new))
	total_crash=$((total_crash + crash))
done

echo
printf '%-40s %8s %14s %16s %9s %s\n' target time execs "new interesting" crashers result
for r in "${rows[@]}"; do
	# shellcheck disable=SC2086 # the row's fields are single words
	printf '%-40s %8s %14s %16s %9s %s\n' $r
done
printf '%-40s %8s %14s %16s %9s %s\n' "total ($n targets)" - "$total_execs" "$total_new" "$total_crash" \
	"$([ "$failed" -eq 0 ] && echo ok || echo "$failed failed")"
echo "logs: $FUZZ_LOGS"
if [ -n "${FUZZ_SUMMARY:-}" ]; then
	echo "targets=$n execs=$total_execs new=$total_new crashers=$total_crash failed=$failed" >"$FUZZ_SUMMARY"
fi
[ "$n" -gt 0 ] || { echo "fuzz: no target matches FUZZ_RUN=$FUZZ_RUN" >&2; exit 1; }
[ "$failed" -eq 0 ]
