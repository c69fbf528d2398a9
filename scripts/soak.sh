#!/usr/bin/env bash
# soak.sh: the release check a maintainer runs before a release (`make
# soak`), hours long. Stages, in order, each whatever the one before did:
#   props     the volume property tests at SOAK_CHECKS cases per layout (make soak-props)
#   fuzz      every fuzz target for FUZZTIME (scripts/fuzz.sh)
#   campaign  the fault campaign, SOAK_ROUNDS rounds from the clock (make campaign)
# A failed stage does not stop the later ones. The report at the end is a
# table: stage, duration, cases/execs/rounds, result; each stage's log is in
# SOAK_LOGS.
#
# Environment: SOAK_STAGES (default "props fuzz campaign"), SOAK_CHECKS
# (10000), SOAK_COUNT (1), FUZZTIME (10m), SOAK_ROUNDS (200), SOAK_COMPOUND
# (1: every round overlaps two or three faults, make campaign COMPOUND=1),
# CAMPAIGN_FLAGS, SOAK_LOGS (default a new folder under ${TMPDIR:-/tmp}).
#
# Exit status: 0 when every stage passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
MAKE=${MAKE:-make}
SOAK_STAGES=${SOAK_STAGES:-props fuzz campaign}
SOAK_CHECKS=${SOAK_CHECKS:-10000}
SOAK_COUNT=${SOAK_COUNT:-1}
FUZZTIME=${FUZZTIME:-10m}
SOAK_ROUNDS=${SOAK_ROUNDS:-200}
SOAK_COMPOUND=${SOAK_COMPOUND:-1}
CAMPAIGN_FLAGS=${CAMPAIGN_FLAGS:-}
SOAK_LOGS=${SOAK_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/nvstripe-soak.XXXXXX")}
mkdir -p "$SOAK_LOGS"

# Each stage function runs its command with output to its log (and the
# terminal) and sets amount to what it covered.
amount=""

props() {
	$MAKE --no-print-directory soak-props GO="$GO" SOAK_CHECKS="$SOAK_CHECKS" SOAK_COUNT="$SOAK_COUNT" 2>&1 | tee "$SOAK_LOGS/props.log"
	local rc=${PIPESTATUS[0]}
	amount=">= $SOAK_CHECKS cases per property and layout"
	[ "$SOAK_COUNT" = 1 ] || amount="$amount, x$SOAK_COUNT"
	return "$rc"
}

fuzz() {
	GO="$GO" FUZZTIME="$FUZZTIME" FUZZ_LOGS="$SOAK_LOGS/fuzz" FUZZ_SUMMARY="$SOAK_LOGS/fuzz.summary" \
		scripts/fuzz.sh 2>&1 | tee "$SOAK_LOGS/fuzz.log"
	local rc=${PIPESTATUS[0]}
	local s
	s=$(cat "$SOAK_LOGS/fuzz.summary" 2>/dev/null)
	amount="$(sed -E 's/.*targets=([0-9]+).*execs=([0-9]+).*/\2 execs, \1 targets/' <<<"$s") x $FUZZTIME"
	return "$rc"
}

campaign() {
	$MAKE --no-print-directory campaign GO="$GO" CAMPAIGN_ROUNDS="$SOAK_ROUNDS" CAMPAIGN_SEED=0 \
		COMPOUND="$SOAK_COMPOUND" CAMPAIGN_FLAGS="$CAMPAIGN_FLAGS" 2>&1 | tee "$SOAK_LOGS/campaign.log"
	local rc=${PIPESTATUS[0]}
	local run failed
	run=$(grep -oE 'campaign-json: .*' "$SOAK_LOGS/campaign.log" | grep -oE '"rounds":[0-9]+' | grep -oE '[0-9]+')
	failed=$(grep -oE 'campaign-json: .*' "$SOAK_LOGS/campaign.log" | grep -oE '"seed":' | wc -l)
	amount="${run:-?} of $SOAK_ROUNDS rounds, $failed failed"
	[ "$SOAK_COMPOUND" != 1 ] || amount="$amount (compound)"
	return "$rc"
}

rows=()
bad=0
for stage in $SOAK_STAGES; do
	case "$stage" in
	props | fuzz | campaign) ;;
	*) echo "soak: unknown stage $stage (props, fuzz, campaign)" >&2; exit 2 ;;
	esac
	echo "=== soak: $stage"
	start=$(date +%s)
	amount=""
	if "$stage"; then result=ok; else result=FAILED; bad=$((bad + 1)); fi
	secs=$(($(date +%s) - start))
	rows+=("$stage|$((secs / 3600))h$((secs % 3600 / 60))m$((secs % 60))s|$amount|$result")
done

echo
echo "soak report ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
printf '%-9s %-10s %-44s %s\n' stage duration cases/execs/rounds result
for r in "${rows[@]}"; do
	IFS='|' read -r stage dur amt res <<<"$r"
	printf '%-9s %-10s %-44s %s\n' "$stage" "$dur" "$amt" "$res"
done
echo "logs: $SOAK_LOGS"
[ "$bad" -eq 0 ]
