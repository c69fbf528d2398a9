package initiator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// anaFixture is two listeners, A (0) and B (1), with ANA group 1 optimized
// on A and non-optimized on B, and an initiator on both paths with verified
// IO running in the background.
type anaFixture struct {
	*fixture
	d    *Device
	stop chan struct{}
	done chan error
}

func newANAFixture(t *testing.T) *anaFixture {
	f := newFixture(t, 2, 16<<20, func(c *target.Config) {
		c.Listeners[0].ANA = map[uint32]pdu.ANAState{1: pdu.ANAOptimized}
		c.Listeners[1].ANA = map[uint32]pdu.ANAState{1: pdu.ANANonOptimized}
	})
	o := f.options(t)
	o.IOQueues = 2
	a := &anaFixture{fixture: f, d: open(t, o), stop: make(chan struct{}), done: make(chan error, 1)}
	waitFor(t, "both paths connected", func() bool {
		s := a.d.Paths()
		return s[0].Connected && s[1].Connected
	})
	go func() { a.done <- runWorkers(a.d, 8, 0, 16, a.stop) }()
	t.Cleanup(a.finish)
	return a
}

// finish stops the IO and returns its first error (once).
func (a *anaFixture) finish() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
}

// stopIO stops the workers and fails the test if any IO error reached them.
func (a *anaFixture) stopIO(t *testing.T) {
	a.finish()
	if err := <-a.done; err != nil {
		t.Fatalf("IO error reached the caller: %v", err)
	}
}

// grows waits until path i has completed n more IOs than now.
func (a *anaFixture) grows(t *testing.T, i int, n uint64, what string) {
	t.Helper()
	start := ioCount(a.d.Paths()[i])
	waitFor(t, what, func() bool {
		select {
		case err := <-a.done:
			t.Fatalf("IO stopped while waiting for %s: %v", what, err)
		default:
		}
		return ioCount(a.d.Paths()[i]) >= start+n
	})
}

// settlesOn waits until IO runs on path i only: once i has done IO and
// the commands still in flight on the other path have drained, the other
// path must not grow while i does another round.
func (a *anaFixture) settlesOn(t *testing.T, i int, what string) {
	t.Helper()
	a.grows(t, i, 64, what)
	waitFor(t, what+": other path drained", func() bool {
		c := a.d.paths[1-i].ctrl.Load()
		return c == nil || c.inflight.Load() == 0
	})
	other := ioCount(a.d.Paths()[1-i])
	a.grows(t, i, 64, what)
	if now := ioCount(a.d.Paths()[1-i]); now != other {
		t.Fatalf("%s: path %d still got %d IOs", what, 1-i, now-other)
	}
}

// TestANAFailover: IO runs on the optimized path A; A becomes inaccessible
// and IO moves to the non-optimized path B with no error reaching the
// caller; A optimized again brings the IO back.
func TestANAFailover(t *testing.T) {
	a := newANAFixture(t)
	a.settlesOn(t, 0, "IO on the optimized path A")
	if n := ioCount(a.d.Paths()[1]); n != 0 {
		t.Fatalf("non-optimized path B got %d IOs while A was optimized", n)
	}
	if err := a.tgt.SetANAState(0, 1, pdu.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	a.settlesOn(t, 1, "IO on B after A became inaccessible")
	if s := a.d.Paths()[0]; !s.Connected || s.ANA != pdu.ANAInaccessible {
		t.Fatalf("path A: %+v, want connected and inaccessible", s)
	}
	if err := a.tgt.SetANAState(0, 1, pdu.ANAOptimized); err != nil {
		t.Fatal(err)
	}
	a.settlesOn(t, 0, "IO back on A after it became optimized")
	a.stopIO(t)
}

// TestListenerLossFailover: A's listener dies (connections dropped, new
// ones refused); IO continues on B with no error reaching the caller; A
// restarts and IO returns to it after the reconnect.
func TestListenerLossFailover(t *testing.T) {
	a := newANAFixture(t)
	a.settlesOn(t, 0, "IO on the optimized path A")
	if err := a.tgt.Faults().StopListener(0); err != nil {
		t.Fatal(err)
	}
	a.settlesOn(t, 1, "IO on B after A's listener stopped")
	if s := a.d.Paths()[0]; s.Connected {
		t.Fatalf("path A still connected after its listener stopped: %+v", s)
	}
	connects := a.d.Paths()[0].Connects
	if err := a.tgt.Faults().StartListener(0); err != nil {
		t.Fatal(err)
	}
	a.settlesOn(t, 0, "IO back on A after its listener restarted")
	if s := a.d.Paths()[0]; s.Connects <= connects {
		t.Fatalf("path A did not reconnect: %+v", s)
	}
	a.stopIO(t)
}

// TestControllerLossTimeout: with the only path gone (listener stopped, or
// frozen so that commands hang), IO fails with ErrUnavailable once
// ControllerLossTimeout passes, rather than hanging; when the path returns,
// IO works again.
func TestControllerLossTimeout(t *testing.T) {
	for _, mode := range []string{"stopped", "frozen"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, 1, 1<<20, nil)
			o := f.options(t)
			o.ControllerLossTimeout = 300 * time.Millisecond
			o.IOTimeout = 300 * time.Millisecond
			o.ConnectTimeout = 300 * time.Millisecond
			o.KATO = 400 * time.Millisecond
			d := open(t, o)
			ctx := context.Background()
			p := make([]byte, 8192)
			if err := d.WriteAt(ctx, p, 0); err != nil {
				t.Fatal(err)
			}
			var fail, heal func(int) error
			if mode == "stopped" {
				fail, heal = f.tgt.Faults().StopListener, f.tgt.Faults().StartListener
			} else {
				fail, heal = f.tgt.Faults().Freeze, f.tgt.Faults().Thaw
			}
			if err := fail(0); err != nil {
				t.Fatal(err)
			}
			err := d.ReadAt(ctx, p, 0)
			if !errors.Is(err, blockdev.ErrUnavailable) {
				t.Fatalf("read with the path %s: %v, want ErrUnavailable", mode, err)
			}
			if err := d.WriteAt(ctx, p, 4096); !errors.Is(err, blockdev.ErrUnavailable) {
				t.Fatalf("write with the path %s: %v, want ErrUnavailable", mode, err)
			}
			if err := heal(0); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "IO to work again", func() bool { return d.ReadAt(ctx, p, 0) == nil })
		})
	}
}

// TestAllPathsInaccessible: a live path in an unusable ANA state does not
// count as working: IO fails with ErrUnavailable after the timeout.
func TestAllPathsInaccessible(t *testing.T) {
	f := newFixture(t, 1, 1<<20, nil)
	o := f.options(t)
	o.ControllerLossTimeout = 200 * time.Millisecond
	d := open(t, o)
	if err := f.tgt.SetANAState(0, 1, pdu.ANAPersistentLoss); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ANA persistent loss to be seen", func() bool { return d.Paths()[0].ANA == pdu.ANAPersistentLoss })
	err := d.ReadAt(context.Background(), make([]byte, 4096), 0)
	if !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("read on a persistent-loss path: %v", err)
	}
}
