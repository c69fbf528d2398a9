package volume

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// mmOp is one step of a metamorphic workload: a write of Len bytes of
// pattern Seed, zeroes, a trim, or a read whose bytes are recorded.
type mmOp struct {
	Kind     string // "write", "zero", "trim", "read"
	Off, Len int64
	Seed     byte
}

// mmWorkload draws n ops over a volume of size bytes from seed: 4 KiB
// aligned, up to two chunks long, so that writes hit partial stripes (delta
// and reconstruct-write), whole chunks and stripe boundaries.
func mmWorkload(seed uint64, g layout.Geometry, size int64, n int) []mmOp {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ops := make([]mmOp, n)
	for i := range ops {
		blocks := 1 + rng.Int64N(2*g.Chunk/4096)
		off := rng.Int64N(size/4096-blocks+1) * 4096
		op := mmOp{Kind: "write", Off: off, Len: blocks * 4096, Seed: byte(rng.Uint32())}
		switch r := rng.IntN(10); {
		case r < 3:
			op.Kind = "read"
		case r == 3:
			op.Kind = "zero"
		case r == 4:
			op.Kind = "trim"
		}
		ops[i] = op
	}
	return ops
}

// mmRun plays ops on v, calling between(i) before op i, and returns a
// digest of every read's bytes in order, followed by the whole volume's.
func mmRun(t *testing.T, v *Volume, ops []mmOp, between func(i int)) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for i, op := range ops {
		between(i)
		var err error
		switch op.Kind {
		case "write":
			err = v.WriteAt(ctx, testutil.Pattern(int(op.Len), op.Seed), op.Off)
		case "zero":
			err = v.WriteZeroes(ctx, op.Off, op.Len)
		case "trim":
			err = v.Trim(ctx, op.Off, op.Len)
		case "read":
			out = append(out, fmt.Sprintf("%d %x", i, sha256.Sum256(mustRead(t, v, op.Off, int(op.Len)))))
		}
		if err != nil {
			t.Fatalf("op %d %+v: %v", i, op, err)
		}
	}
	between(len(ops))
	return append(out, fmt.Sprintf("final %x", sha256.Sum256(mustRead(t, v, 0, int(v.Size())))))
}

// TestMetamorphicHealthyDegradedRebuilt: the same seeded workload on a
// healthy volume, on one with one and with m namespaces down throughout, on
// one that loses a namespace, runs degraded, gets it back and rebuilds it
// (Reinstate and Repair) half-way, then loses m others, and on one whose
// lost namespace's shards are rebuilt elsewhere (MoveSlot) before m others
// go, returns the same bytes from every read and the same final image. Trimmed ranges
// read zero on every variant, so trims count too.
func TestMetamorphicHealthyDegradedRebuilt(t *testing.T) {
	for _, g := range []layout.Geometry{
		{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 256 << 10},
		{K: 3, M: 1, Chunk: 8 << 10, SlotSize: 128 << 10},
		{K: 3, M: 1, Chunk: 8 << 10, SlotSize: 128 << 10, Checksums: true},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("k%dm%d/csum=%v/seed%d", g.K, g.M, g.Checksums, seed), func(t *testing.T) {
				size := 3 * g.SegmentData()
				ops := mmWorkload(seed, g, size, 300)
				want := mmRun(t, newRig(t, g, size, rigOptions{}).vol, ops, func(int) {})
				if m := mmModel(ops, size); want[len(want)-1] != m {
					t.Fatalf("healthy volume: %s, the model: %s", want[len(want)-1], m)
				}
				for name, variant := range mmVariants(g, len(ops)) {
					r := newRig(t, g, size, rigOptions{namespaces: g.N() + 1})
					got := mmRun(t, r.vol, ops, func(i int) { variant(t, r, i) })
					if d := firstDiff(got, want); d != "" {
						t.Errorf("%s: %s", name, d)
					}
				}
			})
		}
	}
}

// mmModel plays ops on a byte slice and digests it as mmRun does.
func mmModel(ops []mmOp, size int64) string {
	img := make([]byte, size)
	for _, op := range ops {
		switch op.Kind {
		case "write":
			copy(img[op.Off:], testutil.Pattern(int(op.Len), op.Seed))
		case "zero", "trim":
			clear(img[op.Off : op.Off+op.Len])
		}
	}
	return fmt.Sprintf("final %x", sha256.Sum256(img))
}

// mmVariants are the failure schedules: each is called before op i (and
// once with i = n before the final read).
func mmVariants(g layout.Geometry, n int) map[string]func(t *testing.T, r *rig, i int) {
	downAt0 := func(idx ...int) func(t *testing.T, r *rig, i int) {
		return func(t *testing.T, r *rig, i int) {
			if i == 0 {
				for _, d := range idx {
					r.devs[d].SetDown(true)
				}
			}
		}
	}
	mDown := make([]int, g.M)
	for i := range mDown {
		mDown[i] = 1 + 2*i%g.N()
	}
	return map[string]func(t *testing.T, r *rig, i int){
		"degraded-1":          downAt0(1),
		"degraded-m":          downAt0(mDown...),
		"rebuilt-then-m-down": func(t *testing.T, r *rig, i int) { mmRebuild(t, r, i, n) },
		"moved-then-m-down":   mmMoveAway(n),
	}
}

// mmMoveAway takes namespace 0 down for good at the start; at n/2, and
// again at the end for segments allocated since, it rebuilds every shard
// namespace 0 held onto another namespace with MoveSlot (as the
// controller's rebuild does); then it takes down m namespaces that received
// no shard, so the final read needs the moved shards.
func mmMoveAway(n int) func(t *testing.T, r *rig, i int) {
	targets := map[string]bool{} // namespaces that received a moved shard
	return func(t *testing.T, r *rig, i int) {
		switch i {
		case 0:
			r.devs[0].SetDown(true)
		case n / 2:
			mmMoveOff(t, r, 0, targets)
		case n:
			mmMoveOff(t, r, 0, targets)
			if len(targets) == 0 {
				t.Fatal("no shard was moved: the variant tests nothing")
			}
			down := 0
			for d := 1; d < len(r.devs) && down < r.g.M; d++ {
				if !targets[r.names[d]] {
					r.devs[d].SetDown(true)
					down++
				}
			}
		}
	}
}

// mmMoveOff moves every slot on namespace from to a free slot of a
// namespace its segment does not use, adding the destinations to targets.
func mmMoveOff(t *testing.T, r *rig, from int, targets map[string]bool) {
	ctx := context.Background()
	for seg := range r.g.Segments(r.vol.Size()) {
		slots, ok, err := r.alloc.Lookup(ctx, seg)
		if err != nil || !ok {
			continue
		}
		for idx, ref := range slots {
			if ref.NS != r.names[from] {
				continue
			}
			to := mmFreeSlot(t, r, slots, from)
			err := r.vol.MoveSlot(ctx, seg, idx, to, MoveOptions{
				Commit: func(ctx context.Context) error { return r.alloc.Replace(ctx, seg, idx, to) },
			})
			if err != nil {
				t.Fatalf("move segment %d slot %d to %v: %v", seg, idx, to, err)
			}
			r.alloc.Release(ref)
			targets[to.NS] = true
		}
	}
}

// mmFreeSlot reserves a slot on a namespace that is not from and not in
// slots.
func mmFreeSlot(t *testing.T, r *rig, slots []SlotRef, from int) SlotRef {
	for d, name := range r.names {
		if d == from || slices.ContainsFunc(slots, func(s SlotRef) bool { return s.NS == name }) {
			continue
		}
		for slot := range r.mems[d].Size() / r.g.SlotSize {
			if ref := (SlotRef{NS: name, Slot: slot}); r.alloc.Reserve(ref) == nil {
				return ref
			}
		}
	}
	t.Fatal("no free slot to move to")
	return SlotRef{}
}

// mmRebuild takes namespace 0 down at the start, brings it back and
// rebuilds it at n/2, and at the end takes down m others, so the final read
// needs the rebuilt shards.
func mmRebuild(t *testing.T, r *rig, i, n int) {
	ctx := context.Background()
	switch i {
	case 0:
		r.devs[0].SetDown(true)
	case n / 2:
		r.devs[0].SetDown(false)
		if _, err := r.vol.Reinstate(ctx, r.names[0]); err != nil {
			t.Fatalf("reinstate: %v", err)
		}
		if _, err := r.vol.Repair(ctx); err != nil {
			t.Fatalf("repair: %v", err)
		}
		r.checkParity(t)
	case n:
		for d := 1; d <= r.g.M; d++ {
			r.devs[d].SetDown(true)
		}
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("read %s, healthy read %s", got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d reads, healthy %d", len(got), len(want))
	}
	return ""
}
