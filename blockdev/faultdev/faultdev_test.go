package faultdev_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
)

const bs = 4096

func newDev(t *testing.T, seed int64) (*faultdev.Dev, *blockdev.Mem) {
	t.Helper()
	m, err := blockdev.NewMem(1<<20, bs)
	if err != nil {
		t.Fatal(err)
	}
	return faultdev.New(m, seed), m
}

func blk(v byte) []byte { return bytes.Repeat([]byte{v}, bs) }

func TestZeroRuleFailsEverything(t *testing.T) {
	ctx := context.Background()
	d, m := newDev(t, 1)
	id := d.Add(faultdev.Rule{})
	if err := d.WriteAt(ctx, blk(1), 0); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("write: %v, want ErrUnavailable", err)
	}
	if err := d.Flush(ctx); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("flush: %v, want ErrUnavailable", err)
	}
	got := make([]byte, bs)
	if err := m.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, make([]byte, bs)) {
		t.Fatalf("failed write reached the device: %v", err)
	}
	if !d.Remove(id) || d.Remove(id) {
		t.Fatal("Remove should report present once")
	}
	if err := d.WriteAt(ctx, blk(1), 0); err != nil {
		t.Fatalf("write after Remove: %v", err)
	}
}

func TestSelection(t *testing.T) {
	ctx := context.Background()
	d, _ := newDev(t, 1)
	custom := blockdev.Mark(errors.New("media error"), blockdev.ErrCorrupt)
	d.Add(faultdev.Rule{Ops: faultdev.OpRead, Off: 8 * bs, Len: 2 * bs, Err: custom})
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"read inside", func() error { return d.ReadAt(ctx, make([]byte, bs), 9*bs) }, custom},
		{"read overlapping start", func() error { return d.ReadAt(ctx, make([]byte, 2*bs), 7*bs) }, custom},
		{"read before", func() error { return d.ReadAt(ctx, make([]byte, bs), 7*bs) }, nil},
		{"read after", func() error { return d.ReadAt(ctx, make([]byte, bs), 10*bs) }, nil},
		{"write inside", func() error { return d.WriteAt(ctx, blk(1), 8*bs) }, nil},
		{"flush", func() error { return d.Flush(ctx) }, nil},
		{"misaligned read", func() error { return d.ReadAt(ctx, make([]byte, 100), 8*bs) }, blockdev.ErrInvalid},
	}
	for _, c := range cases {
		err := c.do()
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	err := d.ReadAt(ctx, make([]byte, bs), 8*bs)
	if !errors.Is(err, blockdev.ErrCorrupt) || blockdev.Class(err) != blockdev.ErrCorrupt {
		t.Errorf("custom error lost its class: %v", err)
	}
}

func TestFailAfterNAndTimes(t *testing.T) {
	ctx := context.Background()
	d, _ := newDev(t, 1)
	id := d.Add(faultdev.Rule{Ops: faultdev.OpWrite, After: 3, Times: 2})
	var got []bool
	for i := 0; i < 8; i++ {
		got = append(got, d.WriteAt(ctx, blk(1), 0) != nil)
		_ = d.ReadAt(ctx, make([]byte, bs), 0) // reads do not count
	}
	want := []bool{false, false, false, true, true, false, false, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("failures %v, want %v", got, want)
		}
	}
	if d.Fired(id) != 2 {
		t.Fatalf("Fired = %d, want 2", d.Fired(id))
	}
}

// outcomes runs n reads under a 30% failure rule and returns which failed.
func outcomes(t *testing.T, seed int64, n int) []bool {
	d, _ := newDev(t, seed)
	d.Add(faultdev.Rule{Prob: 0.3})
	var out []bool
	for i := 0; i < n; i++ {
		out = append(out, d.ReadAt(context.Background(), make([]byte, bs), 0) != nil)
	}
	return out
}

func TestProbabilityDeterministic(t *testing.T) {
	a, b, c := outcomes(t, 7, 400), outcomes(t, 7, 400), outcomes(t, 8, 400)
	fails := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different outcome at call %d", i)
		}
		if a[i] {
			fails++
		}
	}
	if fails < 60 || fails > 180 {
		t.Errorf("%d of 400 calls failed with Prob 0.3", fails)
	}
	if equalBools(a, c) {
		t.Error("seeds 7 and 8 gave the same 400 outcomes")
	}
}

func equalBools(a, b []bool) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTornWrite(t *testing.T) {
	ctx := context.Background()
	const blocks = 32
	seen := map[int]bool{}
	for seed := int64(0); seed < 20; seed++ {
		d, m := newDev(t, seed)
		if err := m.WriteAt(ctx, bytes.Repeat([]byte{1}, blocks*bs), 0); err != nil {
			t.Fatal(err)
		}
		d.Add(faultdev.Rule{Action: faultdev.Tear, Err: blockdev.ErrCorrupt})
		err := d.WriteAt(ctx, bytes.Repeat([]byte{2}, blocks*bs), 0)
		if !errors.Is(err, blockdev.ErrCorrupt) {
			t.Fatalf("torn write returned %v", err)
		}
		got := make([]byte, blocks*bs)
		if err := m.ReadAt(ctx, got, 0); err != nil {
			t.Fatal(err)
		}
		prefix := bytes.IndexByte(got, 1)
		if prefix < 0 || prefix%bs != 0 || bytes.IndexByte(got[prefix:], 2) >= 0 {
			t.Fatalf("seed %d: not a block prefix of new data (prefix %d)", seed, prefix)
		}
		seen[prefix/bs] = true
	}
	if len(seen) < 5 {
		t.Errorf("20 seeds tore at only %d distinct points", len(seen))
	}
}

func TestCorruptRead(t *testing.T) {
	ctx := context.Background()
	d, m := newDev(t, 3)
	want := bytes.Repeat([]byte{0x5a}, 4*bs)
	if err := m.WriteAt(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	d.Add(faultdev.Rule{Action: faultdev.Corrupt, Times: 1})
	got := make([]byte, len(want))
	if err := d.ReadAt(ctx, got, 0); err != nil {
		t.Fatalf("corrupt read must report success: %v", err)
	}
	diff := 0
	for i := range got {
		for x := got[i] ^ want[i]; x != 0; x &= x - 1 {
			diff++
		}
	}
	if diff != 1 {
		t.Fatalf("%d bits differ, want 1", diff)
	}
	if err := d.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after Times exhausted: %v, equal=%v", err, bytes.Equal(got, want))
	}
	if err := d.WriteAt(ctx, want[:bs], 0); err != nil {
		t.Fatalf("corrupt rule must not touch writes: %v", err)
	}
}

func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, _ := newDev(t, 1)
		d.Add(faultdev.Rule{Action: faultdev.Delay, Ops: faultdev.OpFlush, Latency: 30 * time.Millisecond})
		d.Add(faultdev.Rule{Action: faultdev.Delay, Latency: 20 * time.Millisecond})
		start := time.Now()
		if err := d.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el != 50*time.Millisecond {
			t.Fatalf("flush took %v, want 50ms", el)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		if err := d.ReadAt(ctx, make([]byte, bs), 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("delayed read past its deadline: %v", err)
		}
	})
}

func TestDownAndStats(t *testing.T) {
	ctx := context.Background()
	d, _ := newDev(t, 1)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.WriteAt(ctx, make([]byte, 2*bs), 0))
	must(blockdev.WriteFUA(ctx, d, make([]byte, bs), 0))
	must(d.ReadAt(ctx, make([]byte, 3*bs), 0))
	must(d.Flush(ctx))
	must(d.Trim(ctx, 0, bs))
	must(d.WriteZeroes(ctx, 0, bs))
	d.SetDown(true)
	if err := d.ReadAt(ctx, make([]byte, bs), 0); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("read while down: %v", err)
	}
	if _, err := d.Allocated(ctx, 0, bs); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("Allocated while down: %v", err)
	}
	d.SetDown(false)
	must(d.ReadAt(ctx, make([]byte, bs), 0))
	want := faultdev.Stats{Reads: 3, Writes: 2, FUAWrites: 1, Flushes: 1, WriteZeroes: 1, Trims: 1,
		ReadBytes: 5 * bs, WriteBytes: 3 * bs, Injected: 1}
	if got := d.Stats(); got != want {
		t.Fatalf("Stats = %+v\nwant    %+v", got, want)
	}
	d.ResetStats()
	if got := d.Stats(); got != (faultdev.Stats{}) {
		t.Fatalf("after ResetStats: %+v", got)
	}
}

// TestDropWrites: a Drop rule acknowledges writes, write-zeroes, trims and
// flushes in its range without passing them on, leaves reads and calls
// outside its range alone, and stops once removed.
func TestDropWrites(t *testing.T) {
	ctx := context.Background()
	d, m := newDev(t, 4)
	old := blk(0x11)
	for off := int64(0); off < 4*bs; off += bs {
		if err := m.WriteAt(ctx, old, off); err != nil {
			t.Fatal(err)
		}
	}
	id := d.Add(faultdev.Rule{Action: faultdev.Drop, Off: 0, Len: 2 * bs})
	if err := d.WriteAt(ctx, blk(0x22), 0); err != nil {
		t.Fatalf("dropped write must report success: %v", err)
	}
	if err := blockdev.WriteFUA(ctx, d, blk(0x22), bs); err != nil {
		t.Fatalf("dropped FUA write must report success: %v", err)
	}
	if err := d.WriteZeroes(ctx, 0, bs); err != nil {
		t.Fatalf("dropped write-zeroes must report success: %v", err)
	}
	if err := d.Trim(ctx, bs, bs); err != nil {
		t.Fatalf("dropped trim must report success: %v", err)
	}
	if err := d.WriteAt(ctx, blk(0x33), 2*bs); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, bs)
	for i, want := range [][]byte{old, old, blk(0x33), old} {
		if err := d.ReadAt(ctx, got, int64(i)*bs); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("block %d: err %v, got %#x want %#x", i, err, got[0], want[0])
		}
	}
	if n := d.Fired(id); n != 4 {
		t.Fatalf("rule fired %d times, want 4 (the reads and the write outside its range pass)", n)
	}
	d.Remove(id)
	if err := d.WriteAt(ctx, blk(0x44), 0); err != nil {
		t.Fatal(err)
	}
	if err := d.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, blk(0x44)) {
		t.Fatalf("write after the rule was removed: err %v, got %#x", err, got[0])
	}
}

// TestOpNamesMatchBlockdev: a kind prints as blockdev.Op prints it (the
// name metrics label it with), so a fault message and a metric agree.
func TestOpNamesMatchBlockdev(t *testing.T) {
	for o := blockdev.OpRead; o < blockdev.NumOps; o++ {
		if got := (faultdev.Op(1) << o).String(); got != o.String() {
			t.Errorf("faultdev kind of %v prints %q", o, got)
		}
	}
	if got := (faultdev.OpRead | faultdev.OpTrim).String(); got != "ops(0x11)" {
		t.Errorf("a set prints %q, want ops(0x11)", got)
	}
}
