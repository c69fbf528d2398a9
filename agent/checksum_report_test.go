package agent

import (
	"testing"

	"github.com/nvstripe/nvstripe/volume"
)

// TestChecksumReports: blocks a resync took as torn (a crash, a fenced
// owner) and IO errors never make a namespace a media failure; the
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
	}
	if len(rep.ch) != 0 {
		t.Fatalf("torn blocks and IO errors reported %d media errors", len(rep.ch))
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
