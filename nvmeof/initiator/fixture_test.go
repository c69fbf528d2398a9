package initiator

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

const (
	testNQN  = "nqn.2024-01.io.nvstripe:initiator-test"
	testHost = "nqn.2024-01.io.nvstripe:host-a"
)

// fixture is a real nvmeof/target on 127.0.0.1 serving one in-memory
// namespace (NSID 1) through one or more listeners.
type fixture struct {
	tgt   *target.Target
	mem   *blockdev.Mem
	addrs []string
}

// newFixture starts a target with n listeners over a Mem of size bytes;
// mut may adjust the configuration first.
func newFixture(t testing.TB, n int, size int64, mut func(*target.Config)) *fixture {
	t.Helper()
	mem, err := blockdev.NewMem(size, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cfg := target.Config{
		Subsystems: []target.SubsystemConfig{{
			NQN:          testNQN,
			AllowedHosts: []string{testHost},
			Namespaces:   []target.NamespaceConfig{{NSID: 1, Device: mem}},
		}},
	}
	for i := 0; i < n; i++ {
		cfg.Listeners = append(cfg.Listeners, target.ListenerConfig{Address: "127.0.0.1:0"})
	}
	if mut != nil {
		mut(&cfg)
	}
	tgt, err := target.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tgt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	return &fixture{tgt: tgt, mem: mem, addrs: tgt.Addrs()}
}

// options returns initiator options for the fixture's paths with short
// timeouts suitable for tests.
func (f *fixture) options(t testing.TB) Options {
	return Options{
		HostNQN:               testHost,
		SubsysNQN:             testNQN,
		Paths:                 f.addrs,
		KATO:                  2 * time.Second,
		ControllerLossTimeout: 5 * time.Second,
		ReconnectBackoff:      20 * time.Millisecond,
		MaxReconnectBackoff:   200 * time.Millisecond,
		IOTimeout:             5 * time.Second,
		ConnectTimeout:        2 * time.Second,
		Logf:                  t.Logf,
	}
}

// open opens an initiator Device with o and closes it at cleanup.
func open(t testing.TB, o Options) *Device {
	t.Helper()
	d, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// stamp fills p with data naming its offset and a generation, so a read
// of the wrong place or a stale write is recognised.
func stamp(p []byte, off int64, gen uint64) {
	for i := 0; i+16 <= len(p); i += 16 {
		binary.LittleEndian.PutUint64(p[i:], uint64(off)+uint64(i))
		binary.LittleEndian.PutUint64(p[i+8:], gen*0x9e3779b97f4a7c15+uint64(i))
	}
}

// worker runs verified random IO on its own region [base, base+size) of d
// against a private model until stop closes or an error happens.
type worker struct {
	d          blockdev.Device
	base, size int64
	maxBlocks  int
	rng        *rand.Rand
	model      []byte
	gen        uint64
	ops        int
}

func newWorker(d blockdev.Device, id int, base, size int64, maxBlocks int) *worker {
	return &worker{d: d, base: base, size: size, maxBlocks: maxBlocks, rng: rand.New(rand.NewPCG(uint64(id), 7)),
		model: make([]byte, size)}
}

// step does one random write or read-and-verify.
func (w *worker) step(ctx context.Context) error {
	bs := int64(w.d.BlockSize())
	blocks := int64(w.rng.IntN(w.maxBlocks) + 1)
	off := w.rng.Int64N(w.size/bs-blocks+1) * bs
	n := blocks * bs
	w.ops++
	if w.rng.IntN(2) == 0 {
		w.gen++
		p := make([]byte, n)
		stamp(p, w.base+off, w.gen)
		if err := w.d.WriteAt(ctx, p, w.base+off); err != nil {
			return fmt.Errorf("write off=%d len=%d: %w", w.base+off, n, err)
		}
		copy(w.model[off:], p)
		return nil
	}
	p := make([]byte, n)
	if err := w.d.ReadAt(ctx, p, w.base+off); err != nil {
		return fmt.Errorf("read off=%d len=%d: %w", w.base+off, n, err)
	}
	if !bytes.Equal(p, w.model[off:off+n]) {
		return fmt.Errorf("read off=%d len=%d: data differs from the model", w.base+off, n)
	}
	return nil
}

// runWorkers runs n workers on disjoint regions of d for ops steps each
// (or until stop closes when ops is 0) and returns the first error.
func runWorkers(d blockdev.Device, n, ops, maxBlocks int, stop <-chan struct{}) error {
	region := d.Size() / int64(n)
	region -= region % int64(d.BlockSize())
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWorker(d, i, int64(i)*region, region, maxBlocks)
			for ops == 0 || w.ops < ops {
				select {
				case <-stop:
					return
				default:
				}
				if err := w.step(context.Background()); err != nil {
					errs[i] = fmt.Errorf("worker %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// waitFor is testutil.WaitFor under this package's old name.
var waitFor = testutil.WaitFor

func ioCount(s PathStats) uint64 { return s.Reads + s.Writes }
