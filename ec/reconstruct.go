package ec

import (
	"fmt"
)

// ReconstructRange rebuilds the shards marked in want, data or parity, from
// the shards that are present.
//
// len(shards) and len(want) must be k+m. Each entry of shards is either
// present (length L, the same for all present shards) or missing (length 0).
// A wanted missing shard is written into its own backing array when
// cap >= L (pass buf[:0] to rebuild in place); otherwise a new slice is
// allocated. Either way shards[i] then has length L. Missing shards that are
// not wanted stay missing.
//
// The caller slices every present shard to the same byte range of the stripe,
// so only that range is read and rebuilt: parity byte b depends only on byte
// b of the data shards.
//
// Present shards are only read. If no wanted shard is missing the call does
// nothing. Fewer than k present shards give ErrTooFewShards.
func (c *Codec) ReconstructRange(shards [][]byte, want []bool) error {
	n := c.k + c.m
	if len(shards) != n || len(want) != n {
		return fmt.Errorf("%w: ReconstructRange got %d shards and %d want flags, codec %v needs %d",
			ErrShardCount, len(shards), len(want), c, n)
	}
	present, err := presentShards(shards)
	if err != nil {
		return err
	}
	missingWanted := 0
	for i, w := range want {
		if w && len(shards[i]) == 0 {
			missingWanted++
		}
	}
	if missingWanted == 0 {
		return nil
	}
	if present < c.k || c.enc == nil {
		return fmt.Errorf("%w: %d of %d shards present, need %d (codec %v)",
			ErrTooFewShards, present, n, c.k, c)
	}
	if err := c.enc.ReconstructSome(shards, want); err != nil {
		return fmt.Errorf("ec: reconstruct %v: %w", c, err)
	}
	return nil
}

// presentShards counts the non-empty shards and checks they share one
// length.
func presentShards(shards [][]byte) (present int, err error) {
	size := 0
	for i, s := range shards {
		if len(s) == 0 {
			continue
		}
		if size == 0 {
			size = len(s)
		} else if len(s) != size {
			return 0, &ShardError{Shard: i, Err: fmt.Errorf("%w: length %d, other present shards have %d", ErrShardSize, len(s), size)}
		}
		present++
	}
	return present, nil
}
