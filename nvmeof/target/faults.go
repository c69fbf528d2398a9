package target

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/accept"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

type anaEntry struct {
	state pdu.ANAState
	chg   uint64 // value of the global change count at the last change
}

// listener is one NVMe port. Its fields are guarded by Target.mu.
type listener struct {
	idx   int
	addr  string // configured
	bound string // bound address, kept across StopListener
	ln    net.Listener
	conns map[*conn]struct{}
	ana   map[uint32]anaEntry
	thaw  chan struct{} // non-nil while frozen; closed to thaw
	// pending counts the connections still in their handshake
	// (pending.go).
	pending *accept.Pending
}

// thawLocked lifts a freeze. REQUIRES: Target.mu.
func (l *listener) thawLocked() {
	if l.thaw != nil {
		close(l.thaw)
		l.thaw = nil
	}
}

// waitThawed blocks while the listener is frozen.
func (t *Target) waitThawed(ctx context.Context, l *listener) error {
	t.mu.Lock()
	ch := l.thaw
	t.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Target) frozen(l *listener) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return l.thaw != nil
}

// FaultOp selects the commands an IOFault applies to.
type FaultOp uint8

// Fault operations.
const (
	FaultAny   FaultOp = iota
	FaultRead          // Read
	FaultWrite         // Write, Write Zeroes, Dataset Management
	FaultFlush         // Flush
)

// IOFault makes matching I/O commands fail with Status.
type IOFault struct {
	NSID   uint32 // 0: any namespace
	Op     FaultOp
	Status pdu.StatusCode
	DNR    bool
	Count  int // commands to fail; 0: until Clear
}

type faultState struct {
	io      []IOFault
	latency time.Duration
}

// Faults injects failures for tests. Obtain it with Target.Faults.
type Faults struct{ t *Target }

// Faults returns the fault hooks of t.
func (t *Target) Faults() *Faults { return &Faults{t: t} }

// FailIO adds an I/O fault; faults are matched in the order added.
func (f *Faults) FailIO(fl IOFault) {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	f.t.fault.io = append(f.t.fault.io, fl)
}

// SetLatency delays every I/O command by d before it runs (0 removes it).
func (f *Faults) SetLatency(d time.Duration) {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	f.t.fault.latency = d
}

// Clear removes I/O faults and latency.
func (f *Faults) Clear() {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	f.t.fault = faultState{}
}

// DropConnections closes every connection of listener i at once (like a
// network failure) and returns how many it closed.
func (f *Faults) DropConnections(i int) (int, error) {
	var conns []*conn
	err := f.t.withListener(i, func(l *listener) error {
		conns = make([]*conn, 0, len(l.conns))
		for c := range l.conns {
			conns = append(conns, c)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, c := range conns {
		c.close()
	}
	return len(conns), nil
}

// Freeze stops listener i's connections from reading or writing anything
// (a hung target): commands are neither read nor answered, keep-alive
// expiry is suspended. New connections are accepted but stay silent.
func (f *Faults) Freeze(i int) error {
	return f.t.withListener(i, func(l *listener) error {
		if l.thaw == nil {
			l.thaw = make(chan struct{})
		}
		return nil
	})
}

// Thaw undoes Freeze.
func (f *Faults) Thaw(i int) error {
	return f.t.withListener(i, func(l *listener) error {
		l.thawLocked()
		return nil
	})
}

// StopListener closes listener i and all its connections; connecting to
// its port is refused until StartListener.
func (f *Faults) StopListener(i int) error {
	err := f.t.withListener(i, func(l *listener) error {
		if l.ln != nil {
			l.ln.Close()
			l.ln = nil
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = f.DropConnections(i)
	return err
}

// StartListener binds listener i again on the address it had.
func (f *Faults) StartListener(i int) error {
	return f.t.withListener(i, func(l *listener) error {
		if f.t.closed || !f.t.started {
			return ErrClosed
		}
		if l.ln != nil {
			return nil
		}
		return f.t.listenLocked(l, l.bound)
	})
}

// withListener runs fn on listener i with t.mu held; an i that names no
// listener is blockdev.ErrInvalid.
func (t *Target) withListener(i int, fn func(l *listener) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i < 0 || i >= len(t.listeners) {
		return fmt.Errorf("listener %d does not exist: %w", i, blockdev.ErrInvalid)
	}
	return fn(t.listeners[i])
}

// ioFault returns the injected delay and failure for a command.
func (t *Target) ioFault(nsid uint32, op FaultOp) (time.Duration, pdu.Status, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.fault.io {
		fl := &t.fault.io[i]
		if (fl.NSID != 0 && fl.NSID != nsid) || (fl.Op != FaultAny && fl.Op != op) {
			continue
		}
		st := pdu.MakeStatus(fl.Status, fl.DNR)
		if fl.Count > 0 {
			fl.Count--
			if fl.Count == 0 {
				t.fault.io = append(t.fault.io[:i], t.fault.io[i+1:]...)
			}
		}
		return t.fault.latency, st, true
	}
	return t.fault.latency, 0, false
}
