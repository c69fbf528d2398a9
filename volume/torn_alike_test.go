package volume

import (
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestTornWriteOfAlikeBlocks: an owner crashes while rewriting (or
// trimming) whole stripes whose blocks all change alike: each new block is
// its old one xor one constant (testutil.Pattern's versions), or one
// repeated block replaces another, or a trim zeroes a repeated block. A
// row torn between the two versions then has subsets of its shards that
// agree on a codeword neither version wrote, and the resync's search for
// a stale shard took one of them for the truth: a block read, after
// recovery, bytes no write put there (one crash in four to one in six
// here). Every block must read a version written there. Without the write
// log nothing vouches for a rebuilt block, and the search is trusted only
// where every shard matches its checksum, which a torn trim can still
// fool: that case runs with the log only.
func TestTornWriteOfAlikeBlocks(t *testing.T) {
	withLog := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 512 << 10, Checksums: true, Log: true}
	noLog := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10, Checksums: true}
	cases := []struct {
		name string
		g    layout.Geometry
		data func(int, byte) []byte
		trim bool
	}{
		{"xor/log", withLog, testutil.Pattern, false},
		{"xor/nolog", noLog, testutil.Pattern, false},
		{"repeated/log", withLog, repeatedBlock, false},
		{"repeated/nolog", noLog, repeatedBlock, false},
		{"trim/log", withLog, repeatedBlock, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range int64(100) {
				c := newCrashRig(t, tc.g)
				c.pattern = tc.data
				span := 2 * tc.g.StripeData()
				c.write(t, 0, span)
				c.flush(t)
				if tc.trim {
					c.trim(t, 0, span)
				} else {
					c.write(t, 0, span)
				}
				c.crashAndCheck(&seedTB{tb: t, seed: seed}, seed)
			}
		})
	}
}

// seedTB names the crash seed in a failure.
type seedTB struct {
	tb
	seed int64
}

func (s *seedTB) Fatal(args ...any) {
	s.tb.Helper()
	s.tb.Fatalf("crash seed %d: %v", s.seed, args)
}

func (s *seedTB) Fatalf(format string, args ...any) {
	s.tb.Helper()
	s.tb.Fatalf("crash seed %d: "+format, append([]any{s.seed}, args...)...)
}
