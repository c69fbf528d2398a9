package volume

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/volume/layout"
	"pgregory.net/rapid"
)

// propLayouts are the geometries the property tests run over (issue 2): 1+0,
// 2+1, 4+2 and 8+3 with small, unusual chunk and slot sizes.
var propLayouts = []layout.Geometry{
	{K: 1, M: 0, Chunk: 8 << 10, SlotSize: 24 << 10},
	{K: 2, M: 1, Chunk: 4 << 10, SlotSize: 12 << 10},
	{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 32 << 10},
	{K: 8, M: 3, Chunk: 4 << 10, SlotSize: 20 << 10},
}

// propRange draws a block-aligned range inside a volume of size bytes, biased
// towards stripe and chunk boundaries.
func propRange(t *rapid.T, g layout.Geometry, size int64, what string) (off, n int64) {
	blocks := size / 4096
	first := rapid.Int64Range(0, blocks-1).Draw(t, what+"-first")
	if rapid.Bool().Draw(t, what+"-aligned") {
		first -= first % (g.Chunk / 4096)
	}
	count := rapid.Int64Range(1, min(blocks-first, 3*g.StripeData()/4096)).Draw(t, what+"-blocks")
	return first * 4096, count * 4096
}

// TestPropertyAgainstModel runs random writes, reads, trims, write-zeroes,
// flushes, shard failures and recoveries (never more than m namespaces down)
// against a flat model; every read is checked byte for byte and parity is
// checked on healthy stripes after every step.
func TestPropertyAgainstModel(t *testing.T) {
	for _, g := range propLayouts {
		t.Run(fmt.Sprintf("%d+%d", g.K, g.M), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { runModel(rt, g) })
		})
	}
}

func runModel(t *rapid.T, g layout.Geometry) {
	size := 3*g.SegmentData() - 4096*int64(rapid.IntRange(0, 2).Draw(t, "shrink"))
	r := newRig(t, g, size, rigOptions{pureGo: g.K == 2})
	ctx := context.Background()
	model := make([]byte, size)
	down := map[int]bool{}
	seed := byte(0)
	t.Repeat(map[string]func(*rapid.T){
		"write": func(t *rapid.T) {
			off, n := propRange(t, g, size, "w")
			seed++
			data := pattern(int(n), seed)
			if err := r.vol.WriteAt(ctx, data, off); err != nil {
				t.Fatalf("write %d+%d: %v", off, n, err)
			}
			copy(model[off:], data)
		},
		"read": func(t *rapid.T) {
			off, n := propRange(t, g, size, "r")
			got := make([]byte, n)
			if err := r.vol.ReadAt(ctx, got, off); err != nil {
				t.Fatalf("read %d+%d: %v", off, n, err)
			}
			if !bytes.Equal(got, model[off:off+n]) {
				t.Fatalf("read %d+%d differs from the model", off, n)
			}
		},
		"trim": func(t *rapid.T) {
			off, n := propRange(t, g, size, "t")
			if err := r.vol.Trim(ctx, off, n); err != nil {
				t.Fatalf("trim %d+%d: %v", off, n, err)
			}
			clear(model[off : off+n])
		},
		"zeroes": func(t *rapid.T) {
			off, n := propRange(t, g, size, "z")
			if err := r.vol.WriteZeroes(ctx, off, n); err != nil {
				t.Fatalf("write-zeroes %d+%d: %v", off, n, err)
			}
			clear(model[off : off+n])
		},
		"flush": func(t *rapid.T) {
			if err := r.vol.Flush(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
		},
		"fail": func(t *rapid.T) {
			if len(down) >= g.M {
				t.Skip("m namespaces already down")
			}
			i := rapid.IntRange(0, len(r.devs)-1).Draw(t, "fail-ns")
			down[i] = true
			r.devs[i].SetDown(true)
		},
		"recover": func(t *rapid.T) {
			if len(down) == 0 {
				t.Skip("nothing down")
			}
			for i := range down {
				r.devs[i].SetDown(false)
				r.vol.SetNamespaceUp(r.names[i], true)
				delete(down, i)
				break
			}
			if _, err := r.vol.Repair(ctx); err != nil {
				t.Fatalf("repair: %v", err)
			}
		},
		"": func(t *rapid.T) {
			r.checkParity(t)
		},
	})
	got := make([]byte, size)
	if err := r.vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("final read: err %v, equal %v", err, bytes.Equal(got, model))
	}
}

// TestPropertyCrash crashes the in-memory devices at a random point (keeping a
// random subset of unflushed writes, as real drives do), lets a new owner
// resync the dirty segments, and checks that everything acknowledged before
// the last completed flush reads back; blocks written after it read as one of
// the values they held since.
func TestPropertyCrash(t *testing.T) {
	for _, g := range propLayouts {
		t.Run(fmt.Sprintf("%d+%d", g.K, g.M), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { runCrash(rt, g) })
		})
	}
}

// crashModel tracks, per 4 KiB block, the value at the last flush and the
// values written since.
type crashModel struct {
	flushed [][]byte   // per block; nil = zeros
	since   [][][]byte // per block: values written after the last flush
	current [][]byte
}

func newCrashModel(blocks int64) *crashModel {
	return &crashModel{flushed: make([][]byte, blocks), since: make([][][]byte, blocks), current: make([][]byte, blocks)}
}

func (m *crashModel) write(off int64, data []byte) {
	for i := int64(0); i < int64(len(data)); i += 4096 {
		b := (off + i) / 4096
		v := data[i : i+4096 : i+4096]
		if data == nil {
			v = nil
		}
		m.current[b] = v
		m.since[b] = append(m.since[b], v)
	}
}

func (m *crashModel) flush() {
	copy(m.flushed, m.current)
	clear(m.since)
}

func (m *crashModel) check(t *rapid.T, got []byte) {
	zero := make([]byte, 4096)
	for b := range m.flushed {
		blk := got[b*4096 : (b+1)*4096]
		ok := bytes.Equal(blk, orZero(m.flushed[b], zero))
		for _, v := range m.since[b] {
			ok = ok || bytes.Equal(blk, orZero(v, zero))
		}
		if !ok {
			t.Fatalf("block %d after crash holds data never written there (%d writes since the last flush)", b, len(m.since[b]))
		}
	}
}

func orZero(b, zero []byte) []byte {
	if b == nil {
		return zero
	}
	return b
}

func runCrash(t *rapid.T, g layout.Geometry) {
	size := 2 * g.SegmentData()
	r := newRig(t, g, size, rigOptions{crashable: true})
	ctx := context.Background()
	m := newCrashModel(size / 4096)
	seed := byte(0)
	t.Repeat(map[string]func(*rapid.T){
		"write": func(t *rapid.T) {
			off, n := propRange(t, g, size, "w")
			seed++
			data := pattern(int(n), seed)
			if err := r.vol.WriteAt(ctx, data, off); err != nil {
				t.Fatal(err)
			}
			m.write(off, data)
		},
		"trim": func(t *rapid.T) {
			off, n := propRange(t, g, size, "t")
			if err := r.vol.Trim(ctx, off, n); err != nil {
				t.Fatal(err)
			}
			m.write(off, make([]byte, n))
		},
		"flush": func(t *rapid.T) {
			if err := r.vol.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			m.flush()
		},
		"clean": func(t *rapid.T) {
			if err := r.vol.Clean(ctx); err != nil {
				t.Fatal(err)
			}
			m.flush()
		},
	})
	rng := rand.New(rand.NewSource(rapid.Int64().Draw(t, "crash-seed")))
	crashed := DeviceMap{}
	for i, mem := range r.mems {
		crashed[r.names[i]] = mem.CrashCloneRand(rng)
	}
	r.reopen(t, crashed)
	if _, err := r.vol.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
	got := make([]byte, size)
	if err := r.vol.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	m.check(t, got)
	r.rebindMems(crashed)
	r.checkParity(t)
}
