package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/volume"
)

// TestChecksumReports: blocks a resync took as torn (a crash, a fenced
// owner), blocks left bad in a segment whose resync after a crash is still
// pending, and IO errors never make a namespace a media failure; the
// checksumMediaError-th real mismatch does. Counting torn blocks or IO
// errors as mismatches (as the first version did) failed a fault campaign
// round: after a 12 s etcd stall two namespaces were reported failed and
// the volume could not be rebuilt anywhere.
func TestChecksumReports(t *testing.T) {
	rep := newReporter(nil, ReportOptions{}, NewMetrics(), t.Logf)
	ev := newVolEvents("v", NewMetrics(), rep, func(string, ...any) {})
	l := ev.listener()
	for range 3 * checksumMediaError {
		l.ShardError(volume.ShardInfo{NS: "a"})
		l.Checksum(volume.ChecksumInfo{NS: "a", Blocks: 2, Torn: 2})
		l.Checksum(volume.ChecksumInfo{NS: "a", Blocks: 2, Torn: 1, Unsettled: 1, FoundBy: "read"})
	}
	if len(rep.ch) != 0 {
		t.Fatalf("torn blocks, blocks of segments not yet resynced and IO errors reported %d media errors", len(rep.ch))
	}
	for i := range checksumMediaError {
		l.Checksum(volume.ChecksumInfo{NS: "a", Blocks: 1, Healed: 1})
		if want := 0; i < checksumMediaError-1 && len(rep.ch) != want {
			t.Fatalf("after %d mismatches: %d media errors", i+1, len(rep.ch))
		}
	}
	if len(rep.ch) != 1 || <-rep.ch != "a" {
		t.Fatalf("the %dth mismatch did not report namespace a", checksumMediaError)
	}
}

// TestBadBlockMetrics: every bad block a heal reports is counted once, by
// namespace, finder (read, scrub, resync) and result.
func TestBadBlockMetrics(t *testing.T) {
	m := NewMetrics()
	ev := newVolEvents("v", m, newReporter(nil, ReportOptions{}, m, t.Logf), func(string, ...any) {})
	l := ev.listener()
	l.Checksum(volume.ChecksumInfo{NS: "a", Blocks: 3, Healed: 2, FoundBy: "scrub"})
	l.Checksum(volume.ChecksumInfo{NS: "a", Blocks: 1, Healed: 1, FoundBy: "scrub"})
	l.Checksum(volume.ChecksumInfo{NS: "b", Blocks: 2, Torn: 2, FoundBy: "resync"})
	l.Checksum(volume.ChecksumInfo{NS: "b", Blocks: 1, Healed: 1, FoundBy: "read"})
	l.Checksum(volume.ChecksumInfo{NS: "c", Blocks: 2, Unsettled: 2, FoundBy: "read"})
	want := map[string]float64{
		"a/scrub/healed": 3, "a/scrub/unhealed": 1, "b/resync/torn": 2, "b/read/healed": 1, "c/read/unsettled": 2,
	}
	got := counters(t, m, "nvstripe_agent_checksum_bad_blocks_total", "namespace", "found_by", "result")
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
}

// TestUnsettledLogged: a block a recovery left unsettled is logged with
// its volume offset and the command that settles it, and is no media
// error of any namespace.
func TestUnsettledLogged(t *testing.T) {
	ev, rep, logged := loggedEvents(t)
	ev.listener().Unsettled(volume.UnsettledBlock{Offset: 4755456, Segment: 2, Stripe: 1, Shard: 0})
	lines := *logged
	if len(lines) != 1 || !strings.Contains(lines[0], "offset 4755456") || !strings.Contains(lines[0], "nvstripe volume settle v") {
		t.Errorf("logged %q, want the offset and the settle command", lines)
	}
	if len(rep.ch) != 0 {
		t.Errorf("an unsettled block reported %d media errors", len(rep.ch))
	}
}

// TestDeferredResyncLogged: a segment whose resync after an unclean stop
// Recover deferred (a namespace it needs was unreachable) is logged with
// its volume, segment and cause: it stays dirty, and until it is settled a
// slot that missed its stripes may not be rebuilt, so an operator who sees
// stale slots that stay stale must be able to find why. It is no media
// error of any namespace.
func TestDeferredResyncLogged(t *testing.T) {
	ev, rep, logged := loggedEvents(t)
	cause := errors.New("resync deferred: segment 3 stripe 0: 2 data shards lost in a stripe written at the crash")
	ev.listener().ShardError(volume.ShardInfo{NS: "h4-n1", Segment: 3, Slot: -1, Err: cause})
	ev.listener().ShardError(volume.ShardInfo{NS: "h4-n1", Segment: 3, Slot: 0, Err: errors.New("read: connection reset")})
	lines := *logged
	if len(lines) != 1 || !strings.Contains(lines[0], "v: segment 3 stays dirty") || !strings.Contains(lines[0], cause.Error()) {
		t.Errorf("logged %q, want one line naming volume v, segment 3 and the cause", lines)
	}
	if len(rep.ch) != 0 {
		t.Errorf("a deferred resync reported %d media errors", len(rep.ch))
	}
}

// loggedEvents returns the events of volume v, their reporter, and the
// lines the events log.
func loggedEvents(t *testing.T) (*volEvents, *reporter, *[]string) {
	m := NewMetrics()
	rep := newReporter(nil, ReportOptions{}, m, t.Logf)
	ev := newVolEvents("v", m, rep, func(string, ...any) {})
	lines := new([]string)
	ev.logf = func(format string, args ...any) { *lines = append(*lines, fmt.Sprintf(format, args...)) }
	return ev, rep, lines
}
