package ec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// stripeCase is a random encoded stripe drawn by rapid.
type stripeCase struct {
	c      *Codec
	shards [][]byte // encoded, full length
	rng    *rand.ChaCha8
}

// drawStripe draws a geometry (k 1..16, m 0..4), a shard length and random
// data, and encodes it with a codec built from opts.
func drawStripe(t *rapid.T, opts []Option) stripeCase {
	k := rapid.IntRange(1, 16).Draw(t, "k")
	m := rapid.IntRange(0, 4).Draw(t, "m")
	size := rapid.OneOf(
		rapid.IntRange(1, 200),
		rapid.IntRange(200, 5000),
		rapid.Just(4096),
	).Draw(t, "size")
	if rapid.IntRange(0, 15).Draw(t, "big") == 0 {
		size = 64<<10 + 3 // reaches reedsolomon's split and vector main loops
	}
	rng := newRNG(rapid.Uint64().Draw(t, "seed"))
	c := mustNew(t, k, m, opts...)
	shards := encodedStripe(t, c, rng, size)
	return stripeCase{c: c, shards: shards, rng: rng}
}

// TestPropertySIMDMatchesPureGo: every option set produces the parity of the
// pure-Go kernel.
func TestPropertySIMDMatchesPureGo(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		rapid.Check(t, func(t *rapid.T) {
			sc := drawStripe(t, opts)
			ref := cloneShards(sc.shards)
			for _, p := range ref[sc.c.K():] {
				clear(p) // the pure-Go codec must compute it afresh
			}
			if err := mustNew(t, sc.c.K(), sc.c.M(), WithSIMD(false)).Encode(ref); err != nil {
				t.Fatalf("pure-Go Encode: %v", err)
			}
			if !equalShards(sc.shards, ref) {
				t.Fatalf("%v: parity differs from the pure-Go kernel's", sc.c)
			}
		})
	})
}

// drawRange draws a non-empty byte range [lo, hi) of a shard of size bytes.
func drawRange(t *rapid.T, size int) (lo, hi int) {
	lo = rapid.IntRange(0, size-1).Draw(t, "lo")
	hi = rapid.IntRange(lo+1, size).Draw(t, "hi")
	return lo, hi
}

// TestPropertyReconstructRange: encode, slice every shard to a random range,
// drop up to m random shards (some into reusable buffers), rebuild a random
// subset of them, and compare with the original bytes.
func TestPropertyReconstructRange(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		rapid.Check(t, func(t *rapid.T) {
			sc := drawStripe(t, opts)
			n := sc.c.K() + sc.c.M()
			lo, hi := drawRange(t, len(sc.shards[0]))
			drop := rapid.SliceOfNDistinct(rapid.IntRange(0, n-1), 0, sc.c.M(), rapid.ID[int]).Draw(t, "drop")
			orig := cloneShards(sc.shards)
			work, want, bufs := dropShards(t, sc.shards, lo, hi, drop)
			if err := sc.c.ReconstructRange(work, want); err != nil {
				t.Fatalf("ReconstructRange(drop %v): %v", drop, err)
			}
			checkReconstructed(t, orig, lo, hi, work, want, drop, bufs)
		})
	})
}

// dropShards slices every shard to [lo, hi) and removes those in drop. A
// dropped shard is wanted or not, and missing as nil or as an empty buffer
// with capacity (returned in bufs), as rapid decides.
func dropShards(t *rapid.T, shards [][]byte, lo, hi int, drop []int) (work [][]byte, want []bool, bufs map[int][]byte) {
	work = make([][]byte, len(shards))
	want = make([]bool, len(shards))
	bufs = map[int][]byte{}
	for i := range shards {
		work[i] = shards[i][lo:hi:hi]
		want[i] = rapid.Bool().Draw(t, "want-present")
	}
	for _, i := range drop {
		work[i], want[i] = nil, rapid.Bool().Draw(t, "want")
		if rapid.Bool().Draw(t, "in-place") {
			bufs[i] = make([]byte, 0, hi-lo+rapid.IntRange(0, 10).Draw(t, "extra-cap"))
			work[i] = bufs[i]
		}
	}
	return work, want, bufs
}

// checkReconstructed checks that wanted dropped shards match the original
// range (rebuilt in the caller's buffer when one was given), unwanted dropped
// ones stay missing, and present ones hold their original bytes.
func checkReconstructed(t *rapid.T, orig [][]byte, lo, hi int, work [][]byte, want []bool, drop []int, bufs map[int][]byte) {
	dropped := make([]bool, len(work))
	for _, i := range drop {
		dropped[i] = true
	}
	for i := range work {
		if dropped[i] && !want[i] {
			if len(work[i]) != 0 {
				t.Fatalf("unwanted shard %d was rebuilt", i)
			}
			continue
		}
		if !bytes.Equal(work[i], orig[i][lo:hi]) {
			t.Fatalf("shard %d (dropped %v) differs from the original range [%d,%d)", i, dropped[i], lo, hi)
		}
		if buf, ok := bufs[i]; ok && want[i] && &work[i][0] != &buf[:1][0] {
			t.Fatalf("shard %d was not rebuilt in the caller's buffer", i)
		}
	}
}

// TestPropertyTooFewShards: dropping more than m shards and wanting one of
// them fails with ErrTooFewShards and leaves the shards alone.
func TestPropertyTooFewShards(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		rapid.Check(t, func(t *rapid.T) {
			sc := drawStripe(t, opts)
			n := sc.c.K() + sc.c.M()
			drop := rapid.SliceOfNDistinct(rapid.IntRange(0, n-1), sc.c.M()+1, n, rapid.ID[int]).Draw(t, "drop")
			work := cloneShards(sc.shards)
			want := make([]bool, n)
			for _, i := range drop {
				work[i] = nil
			}
			want[drop[0]] = true
			err := sc.c.ReconstructRange(work, want)
			if !errors.Is(err, ErrTooFewShards) {
				t.Fatalf("dropped %d of %v: err = %v, want ErrTooFewShards", len(drop), sc.c, err)
			}
			for _, i := range drop {
				if work[i] != nil {
					t.Fatalf("failed ReconstructRange set shard %d", i)
				}
			}
		})
	})
}

// TestPropertyUpdateParity: a delta update of a random range of random data
// shards, with random parity shards missing, gives the same parity as a full
// re-encode of the new data, and leaves its inputs alone.
func TestPropertyUpdateParity(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		rapid.Check(t, func(t *rapid.T) {
			sc := drawStripe(t, opts)
			k, m := sc.c.K(), sc.c.M()
			lo, hi := drawRange(t, len(sc.shards[0]))
			oldData, newData := make([][]byte, k), make([][]byte, k)
			for i := range k {
				if rapid.Bool().Draw(t, "changed") {
					oldData[i] = bytes.Clone(sc.shards[i][lo:hi])
					newData[i] = make([]byte, hi-lo)
					fill(sc.rng, newData[i])
				}
			}
			parity := make([][]byte, m)
			for j := range m {
				if rapid.Bool().Draw(t, "parity-present") {
					parity[j] = sc.shards[k+j][lo:hi]
				}
			}
			oldCopy, newCopy := cloneShards(oldData), cloneShards(newData)
			if err := sc.c.UpdateParity(oldData, newData, parity); err != nil {
				t.Fatalf("UpdateParity: %v", err)
			}
			if !equalShards(oldData, oldCopy) || !equalShards(newData, newCopy) {
				t.Fatal("UpdateParity modified its data inputs")
			}
			checkUpdated(t, sc, lo, hi, newData, parity)
		})
	})
}

// checkUpdated re-encodes the stripe with newData applied and compares every
// parity shard passed to UpdateParity (the whole shard, so bytes outside the
// range must be untouched).
func checkUpdated(t *rapid.T, sc stripeCase, lo, hi int, newData, parity [][]byte) {
	k := sc.c.K()
	want := cloneShards(sc.shards)
	for i, nd := range newData {
		if nd != nil {
			copy(want[i][lo:hi], nd)
		}
	}
	if err := sc.c.Encode(want); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	for j, p := range parity {
		if p != nil && !bytes.Equal(sc.shards[k+j], want[k+j]) {
			t.Fatalf("parity %d after delta update differs from a full re-encode", j)
		}
	}
	ok, err := sc.c.Verify(want)
	if err != nil || !ok {
		t.Fatalf("re-encoded stripe does not verify: %v %v", ok, err)
	}
}

// TestPropertyVerify: Verify accepts encoded stripes and rejects any single
// flipped byte when m > 0.
func TestPropertyVerify(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		rapid.Check(t, func(t *rapid.T) {
			sc := drawStripe(t, opts)
			if ok, err := sc.c.Verify(sc.shards); !ok || err != nil {
				t.Fatalf("Verify of a fresh stripe = %v, %v", ok, err)
			}
			if sc.c.M() == 0 {
				return
			}
			i := rapid.IntRange(0, len(sc.shards)-1).Draw(t, "shard")
			b := rapid.IntRange(0, len(sc.shards[i])-1).Draw(t, "byte")
			sc.shards[i][b] ^= rapid.ByteMin(1).Draw(t, "flip")
			if ok, err := sc.c.Verify(sc.shards); ok || err != nil {
				t.Fatalf("Verify after flipping shard %d byte %d = %v, %v; want false", i, b, ok, err)
			}
		})
	})
}
