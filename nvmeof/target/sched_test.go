package target

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// schedCmd is a queued read of n bytes from controller ct.
func schedCmd(ct *controller, c *conn, n uint32) *command {
	cmd := &command{c: c}
	cmd.sqe.SGL.Length = n
	return cmd
}

// TestSchedTurns checks the turn order of ioSched without a target: a
// controller with a deep backlog and one with a single command, in sizes
// that do and do not match.
func TestSchedTurns(t *testing.T) {
	for _, tc := range []struct {
		name         string
		bigN, smallN uint32
		within       int // the lone command starts among the first within
	}{
		{"128KiB backlog, 4KiB lone", 128 << 10, 4096, 2},
		{"1MiB backlog, 4KiB lone", 1 << 20, 4096, 2},
		{"4KiB backlog, 4KiB lone", 4096, 4096, schedQuantum/4096 + 1},
		{"4KiB backlog, 1MiB lone", 4096, 1 << 20, (1<<20)/4096 + schedQuantum/4096 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newIOSched(nil, 1, nil)
			ca, cb := &controller{}, &controller{}
			qa, qb := &conn{ctrl: ca}, &conn{ctrl: cb}
			if !s.admit(schedCmd(ca, qa, tc.bigN)) {
				t.Fatal("first command did not start on an idle namespace")
			}
			for range 256 {
				if s.admit(schedCmd(ca, qa, tc.bigN)) {
					t.Fatal("a command started beyond the depth")
				}
			}
			lone := schedCmd(cb, qb, tc.smallN)
			s.admit(lone)
			for i := 1; ; i++ {
				cmd := s.next()
				if cmd == nil {
					t.Fatal("the lone command never started")
				}
				if cmd == lone {
					if i > tc.within {
						t.Fatalf("the lone command started %dth, want within %d", i, tc.within)
					}
					t.Logf("the lone command started %dth of 257", i)
					return
				}
			}
		})
	}
}

// TestSchedSharesBytes checks that two backlogged controllers move about
// the same bytes whatever their command sizes.
func TestSchedSharesBytes(t *testing.T) {
	s := newIOSched(nil, 1, nil)
	ca, cb := &controller{}, &controller{}
	qa, qb := &conn{ctrl: ca}, &conn{ctrl: cb}
	s.admit(schedCmd(ca, qa, 4096))
	for range 4096 {
		s.admit(schedCmd(ca, qa, 1<<20))
		s.admit(schedCmd(cb, qb, 4096))
	}
	got := map[*controller]int{}
	for range 2048 {
		cmd := s.next()
		got[cmd.c.ctrl] += int(cmd.sqe.SGL.Length)
	}
	a, b := got[ca], got[cb]
	if a == 0 || b == 0 || a > 2*b || b > 2*a {
		t.Fatalf("bytes started: 1MiB controller %d, 4KiB controller %d; want within 2x of each other", a, b)
	}
}

// TestSchedWeights checks that a host weighing 3 starts about three times
// the bytes of a host weighing 1 when both have a backlog.
func TestSchedWeights(t *testing.T) {
	s := newIOSched(nil, 1, map[string]int{"heavy": 3})
	ca, cb := &controller{hostNQN: "heavy"}, &controller{hostNQN: "light"}
	qa, qb := &conn{ctrl: ca}, &conn{ctrl: cb}
	s.admit(schedCmd(ca, qa, 4096))
	for range 1024 {
		s.admit(schedCmd(ca, qa, 64<<10))
		s.admit(schedCmd(cb, qb, 64<<10))
	}
	got := map[*controller]int{}
	for range 800 {
		cmd := s.next()
		got[cmd.c.ctrl] += int(cmd.sqe.SGL.Length)
	}
	if r := float64(got[ca]) / float64(got[cb]); r < 2.5 || r > 3.5 {
		t.Fatalf("bytes started: weight 3 %d, weight 1 %d (ratio %.2f); want about 3", got[ca], got[cb], r)
	}
}

// TestSchedCancel checks that a closing connection's queued commands leave
// the queue and the others keep their turn.
func TestSchedCancel(t *testing.T) {
	s := newIOSched(nil, 1, nil)
	ct := &controller{}
	q1, q2 := &conn{ctrl: ct}, &conn{ctrl: ct}
	s.admit(schedCmd(ct, q1, 4096))
	s.admit(schedCmd(ct, q1, 4096))
	keep := schedCmd(ct, q2, 4096)
	s.admit(keep)
	s.admit(schedCmd(ct, q1, 4096))
	if gone := s.cancel(q1); len(gone) != 2 {
		t.Fatalf("cancel returned %d commands, want 2", len(gone))
	}
	if s.waiting() != 1 {
		t.Fatalf("%d waiting after cancel, want 1", s.waiting())
	}
	if s.next() != keep || s.next() != nil || s.waiting() != 0 {
		t.Fatal("the other queue's command did not run next, alone")
	}
	if s.running != 0 || len(s.flows) != 0 || len(s.ring) != 0 {
		t.Fatalf("scheduler not empty: running %d flows %d ring %d", s.running, len(s.flows), len(s.ring))
	}
}

// gatedDev holds every read until the test lets it through, oldest first
// (a device that serves one request at a time), and reports each read's
// offset as it arrives.
type gatedDev struct {
	blockdev.Device
	arrived chan int64

	mu   sync.Mutex
	held []heldRead
	open bool
}

type heldRead struct {
	off int64
	go_ chan struct{}
}

func (g *gatedDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	ch := make(chan struct{})
	g.mu.Lock()
	if g.open {
		close(ch)
	} else {
		g.held = append(g.held, heldRead{off, ch})
	}
	g.mu.Unlock()
	g.arrived <- off
	<-ch
	return g.Device.ReadAt(ctx, p, off)
}

// releaseOldest lets the oldest held read through and returns its offset.
func (g *gatedDev) releaseOldest() (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 {
		return 0, false
	}
	r := g.held[0]
	g.held = g.held[1:]
	close(r.go_)
	return r.off, true
}

// openAll lets every read through, now and later.
func (g *gatedDev) openAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = true
	for _, r := range g.held {
		close(r.go_)
	}
	g.held = nil
}

// TestFairTargetServesLoneHost runs a real target whose namespace device
// serves one read at a time, oldest first, when the test says so: host A
// queues 256 reads of 128 KiB on one I/O queue, then host B one read of 4
// KiB. B's read must be served within the first few (the device's queue
// depth, plus two), not after A's backlog as first come first served would
// have it (with DeviceQueueDepth 1024, every read goes to the device at
// once and B's is served 257th). No timing decides the result.
func TestFairTargetServesLoneHost(t *testing.T) {
	for _, depth := range []int{1, 4, 32} {
		t.Run(fmt.Sprint("depth ", depth), func(t *testing.T) { fairTargetServesLoneHost(t, depth) })
	}
}

func fairTargetServesLoneHost(t *testing.T, depth int) {
	const backlog, bigNLB = 256, 32
	mem, err := blockdev.NewMem(nsSize, nsBS)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedDev{Device: mem, arrived: make(chan int64, 2*backlog)}
	f := newFixture(t, 1, func(c *Config) {
		c.Subsystems[0].Namespaces[0].Device = g
		c.DeviceQueueDepth = depth
		c.QueueSize = backlog + 1
		// A read run on the reader goroutine would hold it at the gate
		// and leave the rest of A's reads unread.
		c.DisableInlineIO = true
	})
	t.Cleanup(g.openAll) // runs before the target closes
	ns := f.t.subs[testNQN].ns[1]

	aAdmin := dial(t, f.t.Addr(0), pdu.Digests{})
	a := dial(t, f.t.Addr(0), pdu.Digests{})
	mustOK(t, "A io connect", a.connect(1, backlog, aAdmin.adminUp(0), testNQN, testHost, 0, 0))
	bAdmin := dial(t, f.t.Addr(0), pdu.Digests{})
	b := ioUp(t, f.t.Addr(0), pdu.Digests{}, 1, bAdmin.adminUp(0), 0)

	atDevice := 0
	// settle waits until want reads are at the device or waiting for it.
	settle := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for atDevice+ns.sched.waiting() < want {
			select {
			case <-g.arrived:
				atDevice++
			case <-time.After(time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 30s %d reads at the device and %d waiting, want %d in all", atDevice, ns.sched.waiting(), want)
			}
		}
	}
	for i := range backlog {
		s := rwSQE(pdu.IORead, 1, uint64(i%24)*bigNLB, bigNLB, false)
		s.CID, s.Flags = uint16(i), pdu.PSDTSGL
		a.submit(&s, nil)
	}
	settle(backlog)
	bOff := int64(nsSize - nsBS) // A reads below 3 MiB
	s := rwSQE(pdu.IORead, 1, uint64(bOff/nsBS), 1, false)
	s.CID, s.Flags = 0x77, pdu.PSDTSGL
	b.submit(&s, nil)
	settle(backlog + 1)

	served := 0
	for {
		queued := ns.sched.waiting()
		off, ok := g.releaseOldest()
		if !ok {
			t.Fatalf("no read at the device after %d served and B's not among them", served)
		}
		served++
		if off == bOff {
			break
		}
		if queued > 0 {
			<-g.arrived // the freed slot starts the next read in turn
		}
	}
	if served > depth+2 {
		t.Fatalf("device queue depth %d: B's read was served %dth; want within %d", depth, served, depth+2)
	}
	g.openAll()
	in := make([]byte, nsBS)
	for {
		cqe, done := b.handle(b.read(), nil, map[uint16][]byte{0x77: in})
		if done {
			mustOK(t, "B's read", cqe)
			break
		}
	}
	t.Logf("device queue depth %d: B's read served %dth of %d", depth, served, backlog+1)
}

// serialDev serves one IO at a time, each taking at least svc: a device
// with a single head, so that the order the target sends IO decides
// latency.
type serialDev struct {
	blockdev.Device
	svc time.Duration
	mu  sync.Mutex
}

func (d *serialDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	time.Sleep(d.svc)
	return d.Device.ReadAt(ctx, p, off)
}

// BenchmarkFairSerialDevice measures a victim's 4 KiB QD1 read latency on
// an in-process target whose device serves one IO per 500 µs, alone and
// beside a controller with 256 reads of 128 KiB in flight, for several
// device queue depths (1024: every command goes to the device as it
// arrives, first come first served).
func BenchmarkFairSerialDevice(b *testing.B) {
	for _, depth := range []int{1024, 32, 4} {
		for _, flood := range []bool{false, true} {
			name := fmt.Sprintf("depth-%d/alone", depth)
			if flood {
				name = fmt.Sprintf("depth-%d/neighbour-qd256", depth)
			}
			b.Run(name, func(b *testing.B) {
				mem, err := blockdev.NewMem(nsSize, nsBS)
				if err != nil {
					b.Fatal(err)
				}
				f := newFixture(b, 1, func(c *Config) {
					c.Subsystems[0].Namespaces[0].Device = &serialDev{Device: mem, svc: 500 * time.Microsecond}
					c.DeviceQueueDepth = depth
				})
				if flood {
					stop := floodReads(b, f.t.Addr(0), 2, 128, 32, nsSize)
					defer stop()
				}
				victimReads(b, f.t.Addr(0), nsSize)
			})
		}
	}
}
