package ec

import (
	"errors"
	"fmt"
)

// Error classes returned by the codec. Every error the package returns wraps
// exactly one of them (test with errors.Is); the message adds the detail.
var (
	// ErrInvalidParams: New was given an impossible geometry (k < 1, m < 0,
	// k+m > 256).
	ErrInvalidParams = errors.New("ec: invalid parameters")
	// ErrShardCount: a slice of shards (or of want flags) has the wrong
	// number of entries for the codec's k and m.
	ErrShardCount = errors.New("ec: wrong number of shards")
	// ErrShardSize: shards differ in length, or all of them are empty.
	ErrShardSize = errors.New("ec: bad shard size")
	// ErrTooFewShards: fewer than k shards are present, so the missing ones
	// cannot be rebuilt.
	ErrTooFewShards = errors.New("ec: too few shards to reconstruct")
)

// ShardError names the shard a failure belongs to. The codec returns it for
// per-shard size problems; callers (the volume engine) use it to report
// which shard of a stripe failed an IO. errors.Is/As see through it.
type ShardError struct {
	Shard int   // index in the stripe: 0..k-1 data, k..k+m-1 parity
	Err   error // the cause
}

// Error implements error.
func (e *ShardError) Error() string {
	return fmt.Sprintf("shard %d: %v", e.Shard, e.Err)
}

// Unwrap returns the cause.
func (e *ShardError) Unwrap() error { return e.Err }
