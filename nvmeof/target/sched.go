package target

import (
	"sync"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// ioSched shares one namespace's device between the controllers that use
// it. At most depth commands run on the device at once; the others wait in
// a queue per controller (one host's volume session: all its I/O queues
// together), and the queues take turns in deficit round robin by bytes:
// each turn a controller may start commands worth quantum bytes times its
// host's weight (Config.HostWeights; a command counts at least minCost). A host with hundreds of commands queued then
// delays another host's lone command by about one quantum of its own
// data, not by its whole backlog, whatever the mix of sizes; first come
// first served would make the lone command wait for all of them.
//
// Commands run on the goroutines the scheduler starts (never more than
// depth): one that finishes its device IO takes the next command in turn
// itself, so a busy namespace starts no goroutine per command.
type ioSched struct {
	ns      *namespace
	depth   int
	quantum int
	weights map[string]int // Config.HostWeights (read only)

	mu      sync.Mutex
	running int                   // commands holding a slot
	flows   map[*controller]*flow // controllers with commands queued
	ring    []*flow               // the same, in turn order; ring[0] is served
	queued  int                   // commands queued in all flows
}

// flow is one controller's queue of waiting commands (FIFO).
type flow struct {
	key     *controller
	q       []*command
	deficit int // bytes the flow may still start in its current turn
	turn    int // bytes a turn adds: the quantum times its host's weight
}

const (
	schedQuantum = 128 << 10
	minCost      = 4096
	smallReply   = 16 << 10 // read data the reader goroutine may write itself
)

func newIOSched(ns *namespace, depth int, weights map[string]int) *ioSched {
	return &ioSched{ns: ns, depth: depth, quantum: schedQuantum, weights: weights, flows: map[*controller]*flow{}}
}

func cost(cmd *command) int { return max(int(cmd.sqe.SGL.Length), minCost) }

// admit takes a slot for cmd when one is free and nothing waits, and
// reports whether it did; otherwise cmd is queued and a goroutine that
// finishes its command will start it.
func (s *ioSched) admit(cmd *command) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running < s.depth && s.queued == 0 {
		s.running++
		return true
	}
	f := s.flows[cmd.c.ctrl]
	if f == nil {
		f = &flow{key: cmd.c.ctrl, turn: s.quantum * max(1, s.weights[cmd.c.ctrl.hostNQN])}
		s.flows[f.key] = f
		if len(s.ring) == 0 {
			f.deficit = f.turn
		}
		s.ring = append(s.ring, f)
	}
	f.q = append(f.q, cmd)
	s.queued++
	return false
}

// next hands the caller's slot to the next command in turn, or frees it
// and returns nil when nothing waits.
func (s *ioSched) next() *command {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.ring) > 0 {
		f := s.ring[0]
		cmd := f.q[0]
		if c := cost(cmd); f.deficit < c {
			// The turn is over: the next flow's begins.
			s.ring = append(s.ring[1:], f)
			s.ring[0].deficit += s.ring[0].turn
			continue
		} else {
			f.deficit -= c
		}
		f.q[0] = nil
		f.q = f.q[1:]
		s.queued--
		if len(f.q) == 0 {
			s.dropLocked(0)
		}
		return cmd
	}
	s.running--
	return nil
}

// dropLocked removes the empty flow at ring[i]; when it was being served
// the next flow's turn begins.
func (s *ioSched) dropLocked(i int) {
	delete(s.flows, s.ring[i].key)
	s.ring = append(s.ring[:i], s.ring[i+1:]...)
	if i == 0 && len(s.ring) > 0 {
		s.ring[0].deficit += s.quantum
	}
}

// cancel removes the commands of connection c that have not started and
// returns them (the connection is closing; they are not run).
func (s *ioSched) cancel(c *conn) []*command {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[c.ctrl]
	if f == nil {
		return nil
	}
	var gone []*command
	kept := f.q[:0]
	for _, cmd := range f.q {
		if cmd.c == c {
			gone = append(gone, cmd)
		} else {
			kept = append(kept, cmd)
		}
	}
	clear(f.q[len(kept):])
	f.q = kept
	s.queued -= len(gone)
	if len(f.q) == 0 {
		for i, g := range s.ring {
			if g == f {
				s.dropLocked(i)
				break
			}
		}
	}
	return gone
}

// waiting is the number of commands queued.
func (s *ioSched) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

// work runs cmd and then, while commands wait, the next one in turn. The
// slot passes to the next command before the reply is sent: with one
// waiting the reply goes through its connection's writer (it never
// blocks); otherwise this goroutine, holding no slot, writes it itself.
func (s *ioSched) work(cmd *command) {
	for cmd != nil {
		cmd = s.runOne(cmd, false)
	}
}

// runOne runs cmd's device IO, hands its slot on (returning the command
// that now holds it) and replies; inline says the caller is the
// connection's reader, running the queue's only command. The reader
// writes a small reply itself (saving the writer goroutine's wakeup at
// queue depth 1): with nothing else in flight on the queue it can block
// only when the host has left a socket buffer of replies unread, which
// stops that host's own queue and nothing else, until its keep-alive
// timeout or its close.
func (s *ioSched) runOne(cmd *command, inline bool) *command {
	c := cmd.c
	r := cmd.nsIO(s.ns)
	next := s.next()
	cmd.direct = next == nil && (!inline || cmd.sqe.Opcode != pdu.IORead || cmd.sqe.SGL.Length <= smallReply)
	cmd.reply(r)
	c.ninfl.Add(-1)
	c.inflight.Done()
	return next
}
