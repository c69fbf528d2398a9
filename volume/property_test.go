package volume

import (
	"bytes"
	"context"
	"flag"
	"math/rand"
	"slices"
	"strconv"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
	"pgregory.net/rapid"
)

// propLayouts are the geometries the property tests run over: 1+0,
// 2+1, 4+2 and 8+3 with small, unusual chunk and slot sizes.
var propLayouts = []layout.Geometry{
	{K: 1, M: 0, Chunk: 8 << 10, SlotSize: 24 << 10},
	{K: 2, M: 1, Chunk: 4 << 10, SlotSize: 12 << 10},
	{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 32 << 10},
	{K: 8, M: 3, Chunk: 4 << 10, SlotSize: 20 << 10},
	{K: 2, M: 1, Chunk: 8 << 10, SlotSize: 32 << 10, Checksums: true},
	{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10, Checksums: true},
	{K: 3, M: 1, Chunk: 8 << 10, SlotSize: 256 << 10, Checksums: true, Log: true},
	{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 512 << 10, Checksums: true, Log: true},
}

// soakChecks is the number of cases each property test runs per layout
// at least (make soak: 10000); 0 runs the CI count.
var soakChecks = flag.Int("volume.soak", 0, "cases per layout of every volume property test, at least (make soak runs 10000); 0: the CI count")

// checkProperty runs prop with rapid: rounds runs of -rapid.checks cases
// each (the CI count), or under -volume.soak as many runs as make that many
// cases. A replay (-rapid.seed, -rapid.failfile) runs once.
func checkProperty(t *testing.T, rounds int, prop func(*rapid.T)) {
	per, err := strconv.Atoi(flag.Lookup("rapid.checks").Value.String())
	if err != nil || per < 1 {
		per = 100
	}
	if *soakChecks > 0 {
		rounds = (*soakChecks + per - 1) / per
	}
	if flag.Lookup("rapid.seed").Value.String() != "0" || flag.Lookup("rapid.failfile").Value.String() != "" {
		rounds = 1
	}
	for i := 0; i < rounds && !t.Failed(); i++ {
		rapid.Check(t, prop)
	}
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
		t.Run(g.String(), func(t *testing.T) {
			checkProperty(t, 1, func(rt *rapid.T) { runModel(rt, g) })
		})
	}
}

func runModel(t *rapid.T, g layout.Geometry) {
	m := newModelRig(t, g, 3*g.SegmentData()-4096*int64(rapid.IntRange(0, 2).Draw(t, "shrink")))
	rng := func(what string) (int64, int64) { return propRange(t, g, m.size, what) }
	t.Repeat(map[string]func(*rapid.T){
		"write":  func(t *rapid.T) { off, n := rng("w"); m.write(t, off, n) },
		"read":   func(t *rapid.T) { off, n := rng("r"); m.read(t, off, n) },
		"trim":   func(t *rapid.T) { off, n := rng("t"); m.trim(t, off, n) },
		"zeroes": func(t *rapid.T) { off, n := rng("z"); m.zeroes(t, off, n) },
		"flush":  func(t *rapid.T) { m.flush(t) },
		"fail": func(t *rapid.T) {
			if len(m.down) >= g.M {
				t.Skip("m namespaces already down")
			}
			m.fail(rapid.IntRange(0, len(m.r.devs)-1).Draw(t, "fail-ns"))
		},
		"recover": func(t *rapid.T) {
			if len(m.down) == 0 {
				t.Skip("nothing down")
			}
			m.recover(t)
		},
		"": func(t *rapid.T) { m.r.checkParity(t) },
	})
	m.finalRead(t)
}

// modelRig is a volume beside a flat model of its bytes: the actions of
// TestPropertyAgainstModel, which its regression cases replay by name.
type modelRig struct {
	g     layout.Geometry
	size  int64
	r     *rig
	model []byte
	down  []int // namespaces down, in the order they went
	seed  byte
}

func newModelRig(t tb, g layout.Geometry, size int64) *modelRig {
	return &modelRig{g: g, size: size, r: newRig(t, g, size, rigOptions{pureGo: g.K == 2}), model: make([]byte, size)}
}

func (m *modelRig) write(t tb, off, n int64) {
	m.seed++
	data := testutil.Pattern(int(n), m.seed)
	if err := m.r.vol.WriteAt(context.Background(), data, off); err != nil {
		t.Fatalf("write %d+%d: %v", off, n, err)
	}
	copy(m.model[off:], data)
}

func (m *modelRig) read(t tb, off, n int64) {
	got := make([]byte, n)
	if err := m.r.vol.ReadAt(context.Background(), got, off); err != nil {
		t.Fatalf("read %d+%d: %v", off, n, err)
	}
	if !bytes.Equal(got, m.model[off:off+n]) {
		t.Fatalf("read %d+%d differs from the model", off, n)
	}
}

func (m *modelRig) trim(t tb, off, n int64) {
	if err := m.r.vol.Trim(context.Background(), off, n); err != nil {
		t.Fatalf("trim %d+%d: %v", off, n, err)
	}
	clear(m.model[off : off+n])
}

func (m *modelRig) zeroes(t tb, off, n int64) {
	if err := m.r.vol.WriteZeroes(context.Background(), off, n); err != nil {
		t.Fatalf("write-zeroes %d+%d: %v", off, n, err)
	}
	clear(m.model[off : off+n])
}

func (m *modelRig) flush(t tb) {
	if err := m.r.vol.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// fail takes namespace i down (again, if it is down already).
func (m *modelRig) fail(i int) {
	if !slices.Contains(m.down, i) {
		m.down = append(m.down, i)
	}
	m.r.devs[i].SetDown(true)
}

// recover brings back the namespace that went down first and repairs.
func (m *modelRig) recover(t tb) {
	i := m.down[0]
	m.down = m.down[1:]
	m.r.devs[i].SetDown(false)
	m.r.vol.SetNamespaceUp(m.r.names[i], true)
	if _, err := m.r.vol.Repair(context.Background()); err != nil {
		t.Fatalf("repair: %v", err)
	}
}

func (m *modelRig) finalRead(t tb) {
	got := make([]byte, m.size)
	if err := m.r.vol.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, m.model) {
		t.Fatalf("final read: err %v, equal %v", err, bytes.Equal(got, m.model))
	}
}

// TestPropertyCrash crashes the in-memory devices at a random point (keeping a
// random subset of unflushed writes, as real drives do), lets a new owner
// resync the dirty segments, and checks that everything acknowledged before
// the last completed flush reads back; blocks written after it read as one of
// the values they held since.
func TestPropertyCrash(t *testing.T) {
	for _, g := range propLayouts {
		t.Run(g.String(), func(t *testing.T) {
			checkProperty(t, 1, func(rt *rapid.T) { runCrash(rt, g) })
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

func (m *crashModel) check(t tb, got []byte) {
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
	c := newCrashRig(t, g)
	c.pattern = crashPatterns[rapid.IntRange(0, len(crashPatterns)-1).Draw(t, "data")]
	rng := func(what string) (int64, int64) { return propRange(t, g, c.size, what) }
	t.Repeat(map[string]func(*rapid.T){
		"write": func(t *rapid.T) { off, n := rng("w"); c.write(t, off, n) },
		"trim":  func(t *rapid.T) { off, n := rng("t"); c.trim(t, off, n) },
		"flush": func(t *rapid.T) { c.flush(t) },
		"clean": func(t *rapid.T) { c.clean(t) },
	})
	c.crashAndCheck(t, rapid.Int64().Draw(t, "crash-seed"))
}

// crashRig is a volume on crashable devices beside a crashModel: the
// actions of TestPropertyCrash, which its regression cases replay by name.
type crashRig struct {
	size    int64
	r       *rig
	m       *crashModel
	seed    byte
	pattern func(n int, seed byte) []byte // the bytes of each write
}

func newCrashRig(t tb, g layout.Geometry) *crashRig {
	size := 2 * g.SegmentData()
	return &crashRig{size: size, r: newRig(t, g, size, rigOptions{crashable: true}), m: newCrashModel(size / 4096), pattern: addPattern}
}

// crashPatterns are the kinds of data TestPropertyCrash writes: bytes
// whose versions differ by addition (the generic case), and two kinds
// whose versions differ alike in every block, as real data often does
// (where a torn row's two versions can agree on a codeword neither wrote;
// see staleVouched): testutil.Pattern (a version is the last one xor a
// constant) and one block repeated (a disk filled with the same record).
var crashPatterns = []func(n int, seed byte) []byte{addPattern, testutil.Pattern, repeatedBlock}

// repeatedBlock is n bytes of one 4 KiB block of testutil.Pattern, repeated.
func repeatedBlock(n int, seed byte) []byte {
	blk := testutil.Pattern(4096, seed)
	b := make([]byte, 0, n)
	for len(b) < n {
		b = append(b, blk[:min(4096, n-len(b))]...)
	}
	return b
}

func (c *crashRig) write(t tb, off, n int64) {
	c.seed++
	data := c.pattern(int(n), c.seed)
	if err := c.r.vol.WriteAt(context.Background(), data, off); err != nil {
		t.Fatal(err)
	}
	c.m.write(off, data)
}

func (c *crashRig) trim(t tb, off, n int64) {
	if err := c.r.vol.Trim(context.Background(), off, n); err != nil {
		t.Fatal(err)
	}
	c.m.write(off, make([]byte, n))
}

func (c *crashRig) zeroes(t tb, off, n int64) {
	if err := c.r.vol.WriteZeroes(context.Background(), off, n); err != nil {
		t.Fatal(err)
	}
	c.m.write(off, make([]byte, n))
}

func (c *crashRig) flush(t tb) {
	if err := c.r.vol.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.m.flush()
}

func (c *crashRig) clean(t tb) {
	if err := c.r.vol.Clean(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.m.flush()
}

// crashAndCheck crashes every device (keeping unflushed writes as seed
// picks), opens the volume anew, recovers, and checks the bytes and parity.
func (c *crashRig) crashAndCheck(t tb, seed int64) {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	crashed := DeviceMap{}
	for i, mem := range c.r.mems {
		crashed[c.r.names[i]] = mem.CrashCloneRand(rng)
	}
	c.r.reopen(t, crashed)
	if _, err := c.r.vol.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
	recovered := c.r.vol.ChecksumStats()
	got := make([]byte, c.size)
	if err := c.r.vol.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	c.m.check(t, got)
	if c.r.g.Checksums {
		// Torn writes are the resync's to settle: nothing is left for
		// reads or a scrub to find.
		if _, err := c.r.vol.Scrub(ctx, 0, c.r.g.Segments(c.size)-1, nil); err != nil {
			t.Fatalf("scrub after recovery: %v", err)
		}
		if st := c.r.vol.ChecksumStats(); st != recovered || st.Unhealed != 0 {
			t.Fatalf("checksums after recovery %+v, after reading and scrubbing everything %+v", recovered, st)
		}
	}
	c.r.rebindMems(crashed)
	c.r.checkParity(t)
}
