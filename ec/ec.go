// Package ec is nvstripe's erasure codec: a thin, validated layer over
// github.com/klauspost/reedsolomon for stripes of k data and m parity shards.
//
// It encodes parity for a whole stripe, applies delta updates to parity for
// partial writes, rebuilds any byte range of missing shards (data or parity)
// from any k present ones, verifies parity, and runs a self-test at start-up.
//
// Wire format: shard i of a stripe is the byte-wise linear combination over
// GF(2^8) (reedsolomon's field, polynomial 0x11D) of the k data shards with
// the coefficients of reedsolomon's default systematic Vandermonde-derived
// matrix (data shards are stored verbatim; parity shard j is row k+j).
// Byte b of every parity shard depends only on byte b of the data shards, so
// any sub-range of a stripe can be encoded, updated or reconstructed on its
// own. That matrix is what is on disk: SelfTest pins it with golden checksums
// so that a library upgrade changing it fails loudly at start-up instead of
// silently producing parity old stripes cannot be decoded with.
//
// m == 0 is plain striping: Encode and UpdateParity do nothing, Verify
// reports true, and ReconstructRange fails if a wanted shard is missing.
//
// Concurrency: a Codec is immutable after New and safe for concurrent use by
// many goroutines; calls on disjoint buffers run fully in parallel. By default
// each call runs on the calling goroutine only (WithConcurrency).
//
// Errors wrap ErrInvalidParams, ErrShardCount, ErrShardSize or
// ErrTooFewShards; per-shard problems come as *ShardError.
package ec

import (
	"fmt"
	"sync"

	"github.com/klauspost/reedsolomon"
)

// MaxShards is the largest k+m a Codec supports (GF(2^8) limit).
const MaxShards = 256

// Option configures a Codec (see New).
type Option func(*options)

// options holds the settings a Codec is built with.
type options struct {
	// simd lets reedsolomon use the CPU's vector instructions (SSSE3, AVX2,
	// AVX-512, GFNI). Default true. False forces the pure-Go kernels, which
	// must produce identical bytes (tests and SelfTest compare the two).
	simd bool
	// concurrency lets reedsolomon split one call across goroutines.
	// Default false: on small machines and 64-256 KiB shards the split costs
	// more than it gains; callers parallelise across stripes instead.
	concurrency bool
}

// WithSIMD enables (default) or disables vector instructions. Disabled, the
// codec uses reedsolomon's pure-Go path; results are identical.
func WithSIMD(on bool) Option { return func(o *options) { o.simd = on } }

// WithConcurrency lets reedsolomon split one Encode/Reconstruct/Update over
// several goroutines. Default false.
func WithConcurrency(on bool) Option { return func(o *options) { o.concurrency = on } }

// Codec encodes and reconstructs stripes of K() data and M() parity shards.
// It is safe for concurrent use.
type Codec struct {
	k, m int
	opts options
	enc  reedsolomon.Encoder // nil when m == 0
	bufs sync.Pool           // *[]byte scratch for UpdateParity
}

// New returns a codec for k data and m parity shards: 1 <= k, 0 <= m,
// k+m <= 256. Errors wrap ErrInvalidParams and name the bad parameter.
func New(k, m int, opts ...Option) (*Codec, error) {
	switch {
	case k < 1:
		return nil, fmt.Errorf("%w: k (data shards) = %d, must be >= 1", ErrInvalidParams, k)
	case m < 0:
		return nil, fmt.Errorf("%w: m (parity shards) = %d, must be >= 0", ErrInvalidParams, m)
	case k > MaxShards:
		return nil, fmt.Errorf("%w: k (data shards) = %d exceeds %d", ErrInvalidParams, k, MaxShards)
	case m > MaxShards:
		return nil, fmt.Errorf("%w: m (parity shards) = %d exceeds %d", ErrInvalidParams, m, MaxShards)
	case k+m > MaxShards:
		return nil, fmt.Errorf("%w: k+m = %d+%d = %d shards exceeds %d", ErrInvalidParams, k, m, k+m, MaxShards)
	}
	c := &Codec{k: k, m: m, opts: options{simd: true}}
	for _, o := range opts {
		o(&c.opts)
	}
	if m == 0 {
		return c, nil
	}
	enc, err := reedsolomon.New(k, m, c.opts.rsOptions()...)
	if err != nil {
		return nil, fmt.Errorf("%w: reedsolomon k=%d m=%d: %w", ErrInvalidParams, k, m, err)
	}
	c.enc = enc
	return c, nil
}

// rsOptions translates our options into reedsolomon's.
func (o options) rsOptions() []reedsolomon.Option {
	var r []reedsolomon.Option
	if !o.simd {
		r = append(r,
			reedsolomon.WithSSSE3(false), reedsolomon.WithSSE2(false),
			reedsolomon.WithAVX2(false), reedsolomon.WithAVX512(false),
			reedsolomon.WithGFNI(false), reedsolomon.WithAVXGFNI(false),
			reedsolomon.WithNEON(false), reedsolomon.WithSVE(false))
	}
	if !o.concurrency {
		r = append(r, reedsolomon.WithMaxGoroutines(1))
	}
	return r
}

// K returns the number of data shards.
func (c *Codec) K() int { return c.k }

// M returns the number of parity shards.
func (c *Codec) M() int { return c.m }

// String describes the geometry, e.g. "4+2".
func (c *Codec) String() string { return fmt.Sprintf("%d+%d", c.k, c.m) }

// Encode computes the parity shards shards[k:] from the data shards
// shards[:k]. len(shards) must be k+m and every shard the same non-zero
// length. Data shards are only read.
func (c *Codec) Encode(shards [][]byte) error {
	if _, err := c.checkFull(shards, "Encode"); err != nil {
		return err
	}
	if c.enc == nil {
		return nil
	}
	if err := c.enc.Encode(shards); err != nil {
		return fmt.Errorf("ec: encode %v: %w", c, err)
	}
	return nil
}

// Verify reports whether the parity shards match the data shards. Shards are
// given as for Encode and are not modified.
func (c *Codec) Verify(shards [][]byte) (bool, error) {
	if _, err := c.checkFull(shards, "Verify"); err != nil {
		return false, err
	}
	if c.enc == nil {
		return true, nil
	}
	ok, err := c.enc.Verify(shards)
	if err != nil {
		return false, fmt.Errorf("ec: verify %v: %w", c, err)
	}
	return ok, nil
}

// checkFull checks that shards holds k+m shards of one non-zero length and
// returns that length.
func (c *Codec) checkFull(shards [][]byte, op string) (int, error) {
	if len(shards) != c.k+c.m {
		return 0, fmt.Errorf("%w: %s got %d shards, codec %v needs %d", ErrShardCount, op, len(shards), c, c.k+c.m)
	}
	size := len(shards[0])
	if size == 0 {
		return 0, &ShardError{Shard: 0, Err: fmt.Errorf("%w: %s: empty shard", ErrShardSize, op)}
	}
	for i, s := range shards {
		if len(s) != size {
			return 0, &ShardError{Shard: i, Err: fmt.Errorf("%w: %s: length %d, shard 0 has %d", ErrShardSize, op, len(s), size)}
		}
	}
	return size, nil
}
