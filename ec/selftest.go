package ec

import (
	"bytes"
	"fmt"
	"hash/crc32"
)

// selfTestVector is one geometry SelfTest checks, with the CRC-32C of the
// parity it must produce for selfTestData.
type selfTestVector struct {
	k, m   int
	parity uint32 // CRC-32C over parity shards k..k+m-1, in order
}

// selfTestShardSize is deliberately not a multiple of 64 so that the vector
// kernels' tail handling is exercised too.
const selfTestShardSize = 9000 + 13

// selfTestVectors returns the golden vectors. The checksums pin the on-disk
// parity format (see the package doc); regenerate them only with a format
// migration (TestSelfTestGolden prints the values it computes).
func selfTestVectors() []selfTestVector {
	return []selfTestVector{
		{k: 2, m: 1, parity: 0xf32b20c1},
		{k: 4, m: 2, parity: 0x9c75a8f3},
		{k: 8, m: 3, parity: 0x60fbd2b8},
		{k: 16, m: 4, parity: 0x7595447f},
	}
}

// SelfTest checks the codec on known vectors: for several geometries
// (2+1, 4+2, 8+3, 16+4), with vector instructions on and off, it encodes
// fixed data and compares the parity with stored golden checksums and across
// the two paths, verifies, rebuilds a byte range of m lost shards and applies
// a delta update. It takes a few milliseconds; cmd runs it at start-up.
func SelfTest() error {
	for _, v := range selfTestVectors() {
		got, err := selfTestGeometry(v.k, v.m)
		if err != nil {
			return err
		}
		if got != v.parity {
			return fmt.Errorf("ec: self-test %d+%d: parity checksum %#08x, want %#08x (parity format changed)", v.k, v.m, got, v.parity)
		}
	}
	return nil
}

// selfTestGeometry runs the checks for one geometry on both paths and returns
// the parity checksum they agree on.
func selfTestGeometry(k, m int) (uint32, error) {
	var sums [2]uint32
	for i, simd := range []bool{true, false} {
		c, err := New(k, m, WithSIMD(simd))
		if err != nil {
			return 0, err
		}
		sum, err := selfTestCodec(c)
		if err != nil {
			return 0, fmt.Errorf("ec: self-test %v (simd=%v): %w", c, simd, err)
		}
		sums[i] = sum
	}
	if sums[0] != sums[1] {
		return 0, fmt.Errorf("ec: self-test %d+%d: SIMD parity %#08x differs from pure-Go parity %#08x", k, m, sums[0], sums[1])
	}
	return sums[0], nil
}

// selfTestCodec encodes, verifies, reconstructs and updates with c and
// returns the checksum of the parity of the fixed data.
func selfTestCodec(c *Codec) (uint32, error) {
	shards := selfTestShards(c.k, c.m)
	if err := c.Encode(shards); err != nil {
		return 0, err
	}
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for _, p := range shards[c.k:] {
		crc.Write(p)
	}
	if err := selfTestVerify(c, shards, "fresh parity"); err != nil {
		return 0, err
	}
	if err := selfTestReconstruct(c, shards); err != nil {
		return 0, err
	}
	if err := selfTestUpdate(c, shards); err != nil {
		return 0, err
	}
	return crc.Sum32(), nil
}

// selfTestReconstruct drops m shards spread over the stripe and rebuilds a
// sub-range of them.
func selfTestReconstruct(c *Codec, shards [][]byte) error {
	n := c.k + c.m
	lo, hi := selfTestShardSize/3, selfTestShardSize/3+selfTestShardSize/2
	sub := make([][]byte, n)
	want := make([]bool, n)
	for i := range shards {
		sub[i] = shards[i][lo:hi]
	}
	for j := range c.m {
		i := j * n / c.m
		sub[i], want[i] = make([]byte, 0, hi-lo), true
	}
	if err := c.ReconstructRange(sub, want); err != nil {
		return err
	}
	for i := range shards {
		if !bytes.Equal(sub[i], shards[i][lo:hi]) {
			return fmt.Errorf("reconstructed shard %d differs", i)
		}
	}
	return nil
}

// selfTestUpdate rewrites part of data shard 1 (0 when k == 1) with a delta
// update and checks the parity against a full re-encode.
func selfTestUpdate(c *Codec, shards [][]byte) error {
	if c.m == 0 {
		return nil
	}
	d := min(1, c.k-1)
	lo, hi := 100, 100+4096
	oldData, newData := make([][]byte, c.k), make([][]byte, c.k)
	oldData[d] = bytes.Clone(shards[d][lo:hi])
	newData[d] = bytes.Repeat([]byte{0xA5}, hi-lo)
	parity := make([][]byte, c.m)
	for j := range parity {
		parity[j] = shards[c.k+j][lo:hi]
	}
	if err := c.UpdateParity(oldData, newData, parity); err != nil {
		return err
	}
	copy(shards[d][lo:hi], newData[d])
	return selfTestVerify(c, shards, "parity after delta update")
}

// selfTestVerify checks that shards verify, and that they stop verifying
// when one data byte is flipped.
func selfTestVerify(c *Codec, shards [][]byte, what string) error {
	ok, err := c.Verify(shards)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s does not verify", what)
	}
	if c.m == 0 {
		return nil
	}
	shards[0][7] ^= 1
	ok, err = c.Verify(shards)
	shards[0][7] ^= 1
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("%s: Verify missed a flipped data byte", what)
	}
	return nil
}

// selfTestShards returns k+m shards of selfTestShardSize bytes, data filled
// from a fixed pseudo-random sequence (splitmix64) seeded by the geometry.
func selfTestShards(k, m int) [][]byte {
	x := uint64(k)<<32 | uint64(m)
	shards := make([][]byte, k+m)
	for i := range shards {
		shards[i] = make([]byte, selfTestShardSize)
		if i >= k {
			continue
		}
		for j := range shards[i] {
			x += 0x9e3779b97f4a7c15
			z := x
			z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
			z = (z ^ z>>27) * 0x94d049bb133111eb
			shards[i][j] = byte(z ^ z>>31)
		}
	}
	return shards
}
