package ec

import (
	"crypto/subtle"
	"fmt"
	"slices"
)

// UpdateParity applies a partial write to parity without reading the
// unchanged data shards (delta update):
//
//	parity[j] ^= coef(j, i) * (oldData[i] ^ newData[i])  for every changed i
//
// oldData and newData have k entries; entry i is nil (or empty) when data
// shard i is unchanged, otherwise the old and new bytes of shard i over the
// same byte range as parity. parity has m entries, updated in place; a nil
// entry is skipped (that parity shard is missing). All non-empty slices must
// have the same length. The data slices are only read.
func (c *Codec) UpdateParity(oldData, newData, parity [][]byte) error {
	size, err := c.checkUpdate(oldData, newData, parity)
	if err != nil || size == 0 || c.enc == nil {
		return err
	}
	delta, dp := c.scratch(size)
	defer c.bufs.Put(dp)
	// Missing parity shards still get computed (reedsolomon updates all m
	// at once) into one shared sink that is thrown away.
	out := parity
	var sink []byte
	for j, p := range parity {
		if len(p) != 0 {
			continue
		}
		if sink == nil {
			var sp *[]byte
			sink, sp = c.scratch(size)
			defer c.bufs.Put(sp)
			out = slices.Clone(parity)
		}
		out[j] = sink
	}
	for i := range oldData {
		if len(oldData[i]) == 0 {
			continue
		}
		subtle.XORBytes(delta, oldData[i], newData[i])
		if err := c.enc.EncodeIdx(delta, i, out); err != nil {
			return fmt.Errorf("ec: update parity %v shard %d: %w", c, i, err)
		}
	}
	return nil
}

// checkUpdate validates UpdateParity's arguments and returns the common
// length of the non-empty slices (0 when nothing changed or no parity is
// present, i.e. nothing to do).
func (c *Codec) checkUpdate(oldData, newData, parity [][]byte) (int, error) {
	if len(oldData) != c.k || len(newData) != c.k || len(parity) != c.m {
		return 0, fmt.Errorf("%w: UpdateParity got %d old, %d new data and %d parity shards, codec %v needs %d, %d and %d",
			ErrShardCount, len(oldData), len(newData), len(parity), c, c.k, c.k, c.m)
	}
	size, changed, haveParity := 0, false, false
	check := func(i int, s []byte) error {
		if len(s) == 0 {
			return nil
		}
		if size == 0 {
			size = len(s)
		} else if len(s) != size {
			return &ShardError{Shard: i, Err: fmt.Errorf("%w: UpdateParity: length %d, others have %d", ErrShardSize, len(s), size)}
		}
		return nil
	}
	for i := range oldData {
		if (len(oldData[i]) == 0) != (len(newData[i]) == 0) {
			return 0, &ShardError{Shard: i, Err: fmt.Errorf("%w: UpdateParity: old data has %d bytes, new data %d", ErrShardSize, len(oldData[i]), len(newData[i]))}
		}
		changed = changed || len(oldData[i]) != 0
		if err := check(i, oldData[i]); err != nil {
			return 0, err
		}
		if err := check(i, newData[i]); err != nil {
			return 0, err
		}
	}
	for j, p := range parity {
		haveParity = haveParity || len(p) != 0
		if err := check(c.k+j, p); err != nil {
			return 0, err
		}
	}
	if !changed || !haveParity {
		return 0, nil
	}
	return size, nil
}

// scratch returns a buffer of n bytes from the codec's pool and the pool
// handle to give back with c.bufs.Put.
func (c *Codec) scratch(n int) ([]byte, *[]byte) {
	p, _ := c.bufs.Get().(*[]byte)
	if p == nil || cap(*p) < n {
		b := make([]byte, n)
		p = &b
	}
	return (*p)[:n], p
}
