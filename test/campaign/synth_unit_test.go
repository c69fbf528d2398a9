package campaign

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// syntheticHistory records a history shaped like a compound round's: ops
// reads and writes (two in three writes, half of them on hotBlocks
// blocks, the others over blocks), overlapping three at a time, with
// windows where every write fails (a fault: the first failed write of a
// block lands at once, the ones after it not, and reads fail), then the
// end of failed writes (history.failedWritesEnd) and a verify read of
// every block written. The register it simulates is linearizable.
// With landOneIn above 0 each failed write lands with probability
// 1/landOneIn instead.
func syntheticHistory(seed uint64, ops int, blocks int64, windows, landOneIn int) *history {
	rng := rand.New(rand.NewPCG(seed, 0))
	h := newHistory()
	value := map[int64]uint64{}
	var next uint64
	clients := [3]int{h.client(), h.client(), h.client()}
	failFrom := make([]int, windows)
	for i := range failFrom {
		failFrom[i] = (i + 1) * ops / (windows + 1)
	}
	failing := func(i int) bool {
		for _, f := range failFrom {
			if i >= f && i < f+ops/100 {
				return true
			}
		}
		return false
	}
	t := int64(10)
	landed := map[int64]bool{}
	for i := range ops {
		w := i % 3
		b := rng.Int64N(blocks)
		if rng.IntN(2) == 0 {
			b = rng.Int64N(hotBlocks) * (blocks / hotBlocks)
		}
		k := blockKey{rwVolume, b}
		call, ret := t, t+30
		t += 10
		if rng.IntN(3) == 0 {
			if failing(i) {
				continue // a failed read: left out
			}
			h.read(clients[w], k, value[b], call, ret)
			continue
		}
		next++
		if !failing(i) {
			landed[b] = false
			value[b] = next
			h.write(clients[w], k, next, call, ret, nil)
			continue
		}
		if (landOneIn == 0 && !landed[b]) || (landOneIn > 0 && rng.IntN(landOneIn) == 0) {
			value[b], landed[b] = next, true
		}
		h.write(clients[w], k, next, call, ret, errors.New("EIO"))
		clients[w] = h.client()
	}
	t += 1000
	h.failedWritesEndAt(t)
	t += 1000
	for b, v := range value {
		h.read(clients[0], blockKey{rwVolume, b}, v, t, t+5)
		t += 10
	}
	return h
}

// BenchmarkHistoryCheckSynthetic checks a synthetic history the size of
// a long compound round's (300k reads and writes on 12k blocks, a few
// percent failed writes in three fault windows): first-lands, a block's
// first failed write in a window lands; one-in-4, each lands with
// probability 1/4.
func BenchmarkHistoryCheckSynthetic(b *testing.B) {
	for _, bc := range []struct {
		name      string
		landOneIn int
	}{{"first-lands", 0}, {"one-in-4", 4}} {
		b.Run(bc.name, func(b *testing.B) {
			h := syntheticHistory(1, 300_000, 12_000, 3, bc.landOneIn)
			zero := func(blockKey) uint64 { return 0 }
			dir := b.TempDir()
			for b.Loop() {
				res, err := h.check(zero, dir, "h.html")
				b.Logf("%d operations on %d blocks in %v: %v", res.ops, res.blocks, res.took, err)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
