package initiator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// holdDev holds every write inside the device until released, and logs
// when each one lands.
type holdDev struct {
	*blockdev.Mem
	holding atomic.Bool
	entered chan struct{}
	release chan struct{}
	log     *eventLog
	once    sync.Once
}

func (h *holdDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	if h.holding.Load() {
		h.entered <- struct{}{}
		<-h.release
	}
	err := h.Mem.WriteAt(ctx, p, off)
	h.log.add("write landed")
	return err
}

// open lets every held and later write through.
func (h *holdDev) open() { h.once.Do(func() { close(h.release) }) }

// holdWrites starts n writes of a's, to blocks 0 to n-1, and returns once
// every one sits in hold; wait waits for them to end and returns their
// errors.
func holdWrites(ctx context.Context, a *Device, hold *holdDev, n int) (wait func() []error) {
	hold.holding.Store(true)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = a.WriteAt(ctx, bytes.Repeat([]byte{0xAA}, 4096), int64(i)*4096) })
	}
	for range n {
		<-hold.entered
	}
	return func() []error {
		wg.Wait()
		return errs
	}
}

// preemptHeld has b preempt and abort A's key (0xA) while A's writes sit
// in hold: once watcher no longer sees A's key (the preempt has
// published), it lets the held writes finish, then waits for the preempt
// to return ("preempt returned" in hold's log).
func preemptHeld(t *testing.T, b, watcher *Device, hold *holdDev) {
	t.Helper()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		err := b.TakeOver(ctx, 0xB, 0xA)
		hold.log.add("preempt returned")
		done <- err
	}()
	waitFor(t, "A's key to be preempted", func() bool {
		st, err := watcher.Report(ctx)
		return err == nil && !hasKey(st, 0xA)
	})
	hold.open()
	if err := <-done; err != nil {
		t.Fatalf("take over: %v", err)
	}
}

type eventLog struct {
	mu sync.Mutex
	ev []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, s)
}

func (l *eventLog) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ev...)
}

// TestPreemptAndAbortWaitsForInflightWrites: host A has writes that
// passed the reservation check and sit in the device; B's
// preempt-and-abort of A's key must not return before every one of them
// has landed, and A's writes after it are refused.
func TestPreemptAndAbortWaitsForInflightWrites(t *testing.T) {
	const inflight = 8
	hold := &holdDev{entered: make(chan struct{}, inflight), release: make(chan struct{}), log: &eventLog{}}
	f := newFixture(t, 1, 1<<20, func(c *target.Config) {
		hold.Mem = c.Subsystems[0].Namespaces[0].Device.(*blockdev.Mem)
		c.Subsystems[0].Namespaces[0].Device = hold
		c.DisableInlineIO = true // a held write must not hold up its queue's reader
	})
	ctx := context.Background()
	a, b, watcher := hostDev(t, f, 1), hostDev(t, f, 2), hostDev(t, f, 3)
	t.Cleanup(hold.open) // a failing test must not leave writes held
	if err := a.TakeOver(ctx, 0xA, 0); err != nil {
		t.Fatal(err)
	}
	wait := holdWrites(ctx, a, hold, inflight)
	preemptHeld(t, b, watcher, hold)
	for i, err := range wait() {
		if err != nil {
			t.Errorf("A's admitted write %d: %v (it passed the check before the preempt)", i, err)
		}
	}
	ev := hold.log.events()
	if ev[len(ev)-1] != "preempt returned" {
		t.Fatalf("events %v: the preempt returned before A's admitted writes landed", ev)
	}
	if err := b.WriteAt(ctx, bytes.Repeat([]byte{0xBB}, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteAt(ctx, bytes.Repeat([]byte{0xAA}, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("A's write after the preempt: %v, want ErrFenced", err)
	}
	got := make([]byte, 4096)
	if err := b.ReadAt(ctx, got, 0); err != nil || got[0] != 0xBB || got[4095] != 0xBB {
		t.Fatalf("B's data after A's refused write: %x... err %v", got[:4], err)
	}
}

// TestReservationsSurviveRestart: registrations and the reservation are
// kept in the namespace's ReservationFile and restored by a new target.
func TestReservationsSurviveRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ns1.resv")
	mem, err := blockdev.NewMem(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	withFile := func(c *target.Config) {
		c.Subsystems[0].Namespaces[0].Device = mem
		c.Subsystems[0].Namespaces[0].ReservationFile = file
	}
	ctx := context.Background()
	f1 := newFixture(t, 1, 4096, withFile)
	a := hostDev(t, f1, 1)
	if err := a.Register(ctx, RegisterKey, 0, 0xA, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx, AcquireOnly, pdu.ResvWriteExclusive, 0xA, 0); err != nil {
		t.Fatal(err)
	}
	before, err := a.Report(ctx)
	if err != nil || !before.PTPL {
		t.Fatalf("report %+v, err %v: want PTPLS set", before, err)
	}
	a.Close()
	f1.tgt.Close()

	f2 := newFixture(t, 1, 4096, withFile)
	a2, b := hostDev(t, f2, 1), hostDev(t, f2, 2)
	after, err := b.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Gen != before.Gen || after.Type != pdu.ResvWriteExclusive || len(after.Registrants) != 1 ||
		after.Registrants[0] != before.Registrants[0] {
		t.Fatalf("after restart %+v, before %+v", after, before)
	}
	if err := b.WriteAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("non-holder write after restart: %v, want ErrFenced", err)
	}
	if err := a2.WriteAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatalf("holder write after restart: %v", err)
	}
}

// TestReservationStoreFailure: a change that cannot be stored fails and
// is not applied.
func TestReservationStoreFailure(t *testing.T) {
	f := newFixture(t, 1, 1<<20, func(c *target.Config) {
		c.Subsystems[0].Namespaces[0].ReservationFile = filepath.Join(t.TempDir(), "missing-dir", "ns1.resv")
	})
	ctx := context.Background()
	a := hostDev(t, f, 1)
	if err := a.Register(ctx, RegisterKey, 0, 0xA, false); err == nil || errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("register with an unwritable store: %v, want an internal error", err)
	}
	st, err := a.Report(ctx)
	if err != nil || st.Count != 0 || st.Gen != 0 {
		t.Fatalf("report after the failed register: %+v, %v; want nothing registered", st, err)
	}
}

// TestConflictNotRetried: a fenced write fails with ErrFenced after one
// command, even with a second path to try.
func TestConflictNotRetried(t *testing.T) {
	f := newFixture(t, 2, 1<<20, nil)
	ctx := context.Background()
	a := hostDev(t, f, 1)
	o := f.options(t)
	o.HostID = [16]byte{0: 0xA5, 15: 2}
	b := open(t, o) // two paths
	if err := a.TakeOver(ctx, 0xA, 0); err != nil {
		t.Fatal(err)
	}
	before := f.tgt.ReservationConflicts()
	err := b.WriteAt(ctx, make([]byte, 4096), 0)
	var se *StatusError
	if !errors.Is(err, blockdev.ErrFenced) || !errors.As(err, &se) || se.Status != pdu.SCReservationConflict || !se.DNR {
		t.Fatalf("write by a non-registrant: %v, want status 0x83 with DNR, class ErrFenced", err)
	}
	if n := f.tgt.ReservationConflicts() - before; n != 1 {
		t.Fatalf("target refused %d commands for one write, want 1 (the conflict was retried)", n)
	}
	for _, p := range b.Paths() {
		if p.Retries != 0 {
			t.Fatalf("path %s retried %d times", p.Addr, p.Retries)
		}
	}
}

// TestDistinctHostIDsOnOneNode: two devices of one host NQN with distinct
// host IDs are distinct registrants; fencing one leaves the other
// writing.
func TestDistinctHostIDsOnOneNode(t *testing.T) {
	f := newFixture(t, 1, 1<<20, nil)
	ctx := context.Background()
	s1, s2, s3 := hostDev(t, f, 1), hostDev(t, f, 2), hostDev(t, f, 3)
	if err := s1.TakeOver(ctx, 0x100, 0); err != nil {
		t.Fatal(err)
	}
	if err := s2.TakeOver(ctx, 0x200, 0); err != nil {
		t.Fatal(err)
	}
	if err := s3.TakeOver(ctx, 0x101, 0x100); err != nil { // s3 takes s1's volume over
		t.Fatal(err)
	}
	if err := s1.WriteAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("fenced session's write: %v, want ErrFenced", err)
	}
	for _, d := range []*Device{s2, s3} {
		if err := d.WriteAt(ctx, make([]byte, 4096), 4096); err != nil {
			t.Fatalf("unfenced session's write: %v", err)
		}
	}
	if err := s1.ReadAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatalf("fenced session's read under write-exclusive: %v", err)
	}
	if !s1.CanReserve() {
		t.Fatal("CanReserve false against a target with ONCS bit 5")
	}
	if err := s1.Leave(ctx, 0x100); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("fenced session's Leave: %v, want ErrFenced", err)
	}
	if err := s2.Leave(ctx, 0x200); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := s2.WriteAt(ctx, make([]byte, 4096), 4096); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("write after Leave under a held reservation: %v, want ErrFenced", err)
	}
}

// TestPreemptAndAbortWaitsForDisconnectedHost: A's connections drop while
// its admitted writes still sit in the device (its association is gone
// on the target, its commands are not); B's preempt-and-abort must still
// wait for them.
func TestPreemptAndAbortWaitsForDisconnectedHost(t *testing.T) {
	const inflight = 4
	hold := &holdDev{entered: make(chan struct{}, 64), release: make(chan struct{}), log: &eventLog{}}
	f := newFixture(t, 2, 1<<20, func(c *target.Config) {
		hold.Mem = c.Subsystems[0].Namespaces[0].Device.(*blockdev.Mem)
		c.Subsystems[0].Namespaces[0].Device = hold
		c.DisableInlineIO = true // a held write must not hold up its queue's reader
	})
	ctx := context.Background()
	o := f.options(t)
	o.HostID, o.Paths, o.IOQueues = [16]byte{0: 0xA5, 15: 1}, f.addrs[:1], 1
	o.ReconnectBackoff, o.MaxReconnectBackoff, o.ControllerLossTimeout = time.Minute, time.Minute, 500*time.Millisecond
	a := open(t, o)
	o.HostID, o.Paths = [16]byte{0: 0xA5, 15: 2}, f.addrs[1:]
	b := open(t, o)
	o.HostID = [16]byte{0: 0xA5, 15: 3}
	watcher := open(t, o) // B's only queue is busy with the preempt
	t.Cleanup(hold.open)
	if err := a.TakeOver(ctx, 0xA, 0); err != nil {
		t.Fatal(err)
	}
	wait := holdWrites(ctx, a, hold, inflight)
	if _, err := f.tgt.Faults().DropConnections(0); err != nil {
		t.Fatal(err)
	}
	preemptHeld(t, b, watcher, hold)
	wait()
	if ev := hold.log.events(); ev[len(ev)-1] != "preempt returned" {
		t.Fatalf("events %v: the preempt returned before the disconnected host's admitted writes landed", ev)
	}
}

// sessionDev opens a device for the ownership session (tag, epoch).
func sessionDev(t *testing.T, f *fixture, tag byte, epoch uint64) *Device {
	o := f.options(t)
	o.HostID, o.IOQueues = SessionHostID([8]byte{0: tag}, epoch), 1
	return open(t, o)
}

// TestClaim: a session fences every older session of its volume and no
// other volume's session; a stale session that claims after a newer one
// is refused and left unregistered.
func TestClaim(t *testing.T) {
	f := newFixture(t, 1, 1<<20, nil)
	ctx := context.Background()
	v5, v7, other := sessionDev(t, f, 'v', 5), sessionDev(t, f, 'v', 7), sessionDev(t, f, 'w', 6)
	for _, s := range []struct {
		d     *Device
		epoch uint64
	}{{v5, 5}, {other, 6}, {v7, 7}} {
		// Register only, as sessions that lost their lease before fencing.
		if err := s.d.TakeOver(ctx, s.epoch, 0); err != nil {
			t.Fatal(err)
		}
	}
	v9 := sessionDev(t, f, 'v', 9)
	if err := v9.Claim(ctx, 9); err != nil {
		t.Fatalf("claim: %v", err)
	}
	st, err := v9.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for _, r := range st.Registrants {
		keys = append(keys, r.Key)
	}
	if fmt.Sprint(keys) != "[6 9]" || st.Type != pdu.ResvWriteExclusiveAllRegs {
		t.Fatalf("after the claim: keys %v type %v, want [6 9] and write-exclusive all-registrants", keys, st.Type)
	}
	for name, d := range map[string]*Device{"v5": v5, "v7": v7} {
		if err := d.WriteAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
			t.Fatalf("older session %s's write: %v, want ErrFenced", name, err)
		}
	}
	if err := other.WriteAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatalf("other volume's session: %v", err)
	}
	if err := v7.Claim(ctx, 7); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("stale session's claim: %v, want ErrFenced", err)
	}
	if st, err := v9.Report(ctx); err != nil || hasKey(st, 7) {
		t.Fatalf("the stale session stayed registered: %+v, %v", st, err)
	}
	if err := v7.WriteAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("stale session's write after its refused claim: %v, want ErrFenced", err)
	}
}
