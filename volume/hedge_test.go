package volume

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// hedgeRig is a 4+2 volume whose first stripe holds model, with the
// namespace of its data shard 0 down (the volume knows: a read failed on
// it) and that of data shard 1 behind gate, not armed yet. A read of the
// stripe reconstructs shard 0 from shards 1 to 4, parity 5 spare.
type hedgeRig struct {
	*rig
	v      *Volume
	gate   *gate
	slow   string // the gated namespace
	model  []byte
	hedged chan HedgeInfo // every hedge the volume reports
	failed chan string    // namespaces of the shard errors it reports
}

func newHedgeRig(t *testing.T, hedgeAfter time.Duration) *hedgeRig {
	t.Helper()
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 256 << 10, Checksums: true}
	r := newRig(t, g, g.SegmentData(), rigOptions{})
	h := &hedgeRig{rig: r, model: testutil.Pattern(int(g.StripeData()), 5), hedged: make(chan HedgeInfo, 16), failed: make(chan string, 16)}
	mustWriteFlushed(t, r.vol, h.model, 0)
	refs, _, _ := r.alloc.Lookup(ctx, 0)
	down, slow := refs[g.SlotOf(0, 0)].NS, refs[g.SlotOf(0, 1)].NS
	h.slow, h.gate = slow, newGate(r.devs[r.index(slow)])
	dm := DeviceMap{}
	for i, n := range r.names {
		dm[n] = r.devs[i]
	}
	dm[slow] = h.gate
	ev := EventListener{
		Hedged:     func(i HedgeInfo) { h.hedged <- i },
		ShardError: func(s ShardInfo) { h.failed <- s.NS },
	}
	v, err := New(Options{Geometry: g, Size: r.vol.Size(), Devices: dm, Alloc: r.alloc, Dirty: r.dirty, Stale: r.stale,
		Unsettled: r.unsettled, LogEpoch: r.epoch + 1, HedgeAfter: hedgeAfter, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	h.v = v
	r.devs[r.index(down)].SetDown(true)
	mustEqual(t, "read with a namespace down", mustRead(t, v, 0, len(h.model)), h.model)
	select { // reported before the read returned
	case got := <-h.failed:
		if got != down {
			t.Fatalf("shard error on %s, want %s (down)", got, down)
		}
	default:
		t.Fatalf("no shard error reported for %s (down)", down)
	}
	if v.Synchronous() {
		t.Fatal("volume over a gate reads synchronously: it would not hedge")
	}
	for len(h.hedged) > 0 {
		<-h.hedged // the read above may have hedged, its shards slow to answer
	}
	return h
}

// readAsync reads the first stripe into p on a goroutine.
func (h *hedgeRig) readAsync(p []byte) <-chan error {
	done := make(chan error, 1)
	go func() { done <- h.v.ReadAt(context.Background(), p, 0) }()
	return done
}

// TestHedgedReadSkipsSlowShard: a degraded read whose shard read on a
// namespace that does not answer (a gate, held closed) reads the spare
// parity after HedgeAfter and returns the stripe, the slow data shard
// rebuilt too, while the slow read is still in flight. When that read
// ends later, reading other bytes (the namespace's data overwritten
// meanwhile), the caller's buffer keeps what the read returned. Before
// hedged reads, the read waited for the gate (TestUnhedgedReadWaitsForSlowShard).
func TestHedgedReadSkipsSlowShard(t *testing.T) {
	h := newHedgeRig(t, time.Millisecond)
	h.gate.armed.Store(true)
	got := make([]byte, len(h.model))
	done := h.readAsync(got)
	if err := within(t, func() error { return <-done }); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "hedged read", got, h.model)
	checkHedged(t, h)

	// The read left behind lands after the call returned, with other bytes.
	mem := h.mems[h.index(h.slow)]
	if err := mem.WriteAt(context.Background(), testutil.Pattern(int(mem.Size()), 99), 0); err != nil {
		t.Fatal(err)
	}
	<-h.gate.entered // the slow read may reach the device only now
	close(h.gate.open)
	<-h.gate.ended
	if !h.gate.left.Load() {
		t.Fatal("the gated read did not read the device")
	}
	mustEqual(t, "caller's buffer after the slow read ended", got, h.model)
}

// TestHedgedReadAvoidsStalledNamespace: while the read a hedged read left
// behind on a namespace is in flight, the next degraded read of the
// stripe reads the spare in its place: it returns with the gate still
// closed and without a hedge (no wait for HedgeAfter, no second read left
// behind). Once the read left behind ends, the namespace is read again.
func TestHedgedReadAvoidsStalledNamespace(t *testing.T) {
	h := newHedgeRig(t, time.Millisecond)
	h.gate.armed.Store(true)
	got := make([]byte, len(h.model))
	if err := within(t, func() error { return <-h.readAsync(got) }); err != nil {
		t.Fatal(err)
	}
	checkHedged(t, h)
	if err := within(t, func() error { return <-h.readAsync(got) }); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read beside the stalled namespace", got, h.model)
	if n := len(h.hedged); n != 0 {
		t.Fatalf("%d hedges: the read waited for the stalled namespace", n)
	}

	<-h.gate.entered
	close(h.gate.open)
	<-h.gate.ended
	h.gate.armed.Store(false)
	h.v.mu.Lock()
	ns := h.v.ns[h.slow]
	h.v.mu.Unlock()
	_ = within(t, func() error { // the worker uncounts the read after the gate returns
		for ns.leftBehind.Load() != 0 {
			runtime.Gosched()
		}
		return nil
	})
	h.devs[h.index(h.slow)].ResetStats()
	mustEqual(t, "read once the namespace answered", mustRead(t, h.v, 0, len(h.model)), h.model)
	if h.devs[h.index(h.slow)].Stats().Reads == 0 {
		t.Fatalf("%s not read once its read left behind ended", h.slow)
	}
}

// TestUnhedgedReadWaitsForSlowShard: with hedging off (HedgeAfter < 0),
// as before hedged reads, and in a segment whose resync is pending (its
// rows unproven), the degraded read waits for the gated namespace, and
// returns the stripe once it answers.
func TestUnhedgedReadWaitsForSlowShard(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) *hedgeRig{
		"hedging off": func(t *testing.T) *hedgeRig { return newHedgeRig(t, -1) },
		"resync pending": func(t *testing.T) *hedgeRig {
			h := newHedgeRig(t, time.Millisecond)
			h.v.deferred.set(0, true)
			return h
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := open(t)
			h.gate.armed.Store(true)
			got := make([]byte, len(h.model))
			done := h.readAsync(got)
			<-h.gate.entered
			select {
			case err := <-done:
				t.Fatalf("read returned (%v) while a shard read it needs was held", err)
			case <-time.After(50 * time.Millisecond):
			}
			close(h.gate.open)
			if err := within(t, func() error { return <-done }); err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "read after the gate opened", got, h.model)
			if len(h.hedged) != 0 {
				t.Fatalf("%d hedges", len(h.hedged))
			}
		})
	}
}

// TestHedgedReadSlowShardFails: the slow read fails (the gate's error,
// class ErrUnavailable) after the hedged read returned the stripe: its
// error still marks the namespace down (a shard error is reported), and
// the next read plans without it.
func TestHedgedReadSlowShardFails(t *testing.T) {
	h := newHedgeRig(t, time.Millisecond)
	h.gate.armed.Store(true)
	got := make([]byte, len(h.model))
	done := h.readAsync(got)
	if err := within(t, func() error { return <-done }); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "hedged read", got, h.model)
	checkHedged(t, h)
	<-h.gate.entered
	h.gate.fail = fmt.Errorf("gate: %w", blockdev.ErrUnavailable)
	close(h.gate.open)
	var ns string
	_ = within(t, func() error { ns = <-h.failed; return nil }) // the worker reports after the gate returns
	if ns != h.slow {
		t.Fatalf("shard error on %s, want %s (the slow read's)", ns, h.slow)
	}
	h.gate.armed.Store(false) // reads of the namespace reach its faultdev again
	h.rig.devs[h.index(h.slow)].ResetStats()
	mustEqual(t, "read after", mustRead(t, h.v, 0, len(h.model)), h.model)
	if n := h.rig.devs[h.index(h.slow)].Stats().Reads; n != 0 {
		t.Fatalf("%d reads of %s after it failed", n, h.slow)
	}
}

// TestHedgedReadFailsFast: a shard read that fails at once (the gate open,
// failing) starts the spare read without waiting for HedgeAfter (an hour
// here): one hedge, and the read returns the stripe.
func TestHedgedReadFailsFast(t *testing.T) {
	h := newHedgeRig(t, time.Hour)
	h.gate.fail = fmt.Errorf("gate: %w", blockdev.ErrUnavailable)
	close(h.gate.open)
	h.gate.armed.Store(true)
	got := make([]byte, len(h.model))
	if err := within(t, func() error { return <-h.readAsync(got) }); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read", got, h.model)
	checkHedged(t, h)
}

// checkHedged checks that the read that just returned reported one hedge,
// with the gated namespace among the slow (the volume reports it before
// the read returns).
func checkHedged(t *testing.T, h *hedgeRig) {
	t.Helper()
	select {
	case hi := <-h.hedged:
		if !slices.Contains(hi.Slow, h.slow) {
			t.Fatalf("hedge reported %+v, want %s slow", hi, h.slow)
		}
	default:
		t.Fatal("no hedge reported")
	}
	if n := len(h.hedged); n != 0 {
		t.Fatalf("%d more hedges reported, want 1", n)
	}
}

// asyncDev is a device that says it is not Synchronous, so that a volume
// over in-memory namespaces runs its shard IO on workers (and hedges).
type asyncDev struct{ blockdev.Passthrough }

func (asyncDev) Synchronous() bool { return false }

// BenchmarkDegradedRead is read-seq-degraded1 of BenchmarkVolume (4+2,
// 128 KiB chunks, checksums, data shard 1 unavailable, 1 MiB reads) over
// namespaces whose IO is not synchronous, with hedging off and on: the
// cost of a hedged read when no shard is slow (each read into a buffer of
// its own, then copied; every read on a worker; a timer).
func BenchmarkDegradedRead(b *testing.B) {
	for _, c := range []struct {
		name  string
		after time.Duration
	}{{"hedge=off", -1}, {"hedge=on", DefaultHedgeAfter}} {
		b.Run(c.name, func(b *testing.B) {
			g := layout.Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 16 << 20, Checksums: true}
			dm, slots, mems := memNamespaces(b, g, 5)
			for n, d := range dm {
				dm[n] = asyncDev{blockdev.Passthrough{Device: d}}
			}
			v, err := New(Options{Geometry: g, Size: 4 * g.SegmentData(), Devices: dm, Alloc: NewMemAllocator(g.N(), slots), LogEpoch: 1, HedgeAfter: c.after})
			if err != nil {
				b.Fatal(err)
			}
			buf := testutil.Pattern(benchReq, 1)
			for off := int64(0); off+benchReq <= v.Size(); off += benchReq {
				if err := v.WriteAt(context.Background(), buf, off); err != nil {
					b.Fatal(err)
				}
			}
			mems[1].SetUnavailable(true)
			benchSeq(b, v, v.ReadAt)
		})
	}
}

// TestHedgedReadWaitsOutStalledSpare: the only spare is on a namespace
// with a read left behind when the read starts (stalled), and the gated
// shard does not answer: the read does not take the stalled spare, but
// once that namespace's read left behind ends it does, and returns with
// the gate still closed. Before, a read whose spares were all stalled when
// it picked its shards waited for the gated read (a race under load: the
// setup read's own read left behind on the spare's namespace).
func TestHedgedReadWaitsOutStalledSpare(t *testing.T) {
	h := newHedgeRig(t, time.Millisecond)
	refs, _, _ := h.alloc.Lookup(context.Background(), 0)
	h.v.mu.Lock()
	spare := h.v.ns[refs[h.g.SlotOf(0, h.g.K+1)].NS]
	h.v.mu.Unlock()
	for spare.leftBehind.Load() != 0 { // the setup read's own, if any
		runtime.Gosched()
	}
	spare.leftBehind.Add(1) // as if a read were left behind there
	h.gate.armed.Store(true)
	got := make([]byte, len(h.model))
	done := h.readAsync(got)
	<-h.gate.entered
	select {
	case err := <-done:
		t.Fatalf("the read returned (%v) while its only spare was stalled and a shard gated", err)
	case <-time.After(20 * time.Millisecond): // it waits, as it should: 20 HedgeAfters
	}
	spare.leftBehind.Add(-1)
	if err := within(t, func() error { return <-done }); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read once the spare's namespace was no longer stalled", got, h.model)
	close(h.gate.open)
	<-h.gate.ended
}
