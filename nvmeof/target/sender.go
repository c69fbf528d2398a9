package target

import (
	"net"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/internal/rawsock"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// smallData is the size up to which PDU data is copied into the batch
// arena instead of being written from the caller's buffer.
const smallData = 8 << 10

// Arena sizes: a connection without a queue sends an ICResp and one
// completion, so it gets small arenas until grow.
const (
	arenaSize         = 16 << 10
	strangerArenaSize = 512
)

// sender is a connection's single writer. Producers (command goroutines
// and the reader) queue PDUs; the writer goroutine sends everything queued
// so far with one writev, so that concurrent completions share syscalls.
// On a plain TCP connection the writev is a raw system call (package
// rawsock): a C2HData of 128 KiB is a long call, and through net.Buffers
// the runtime's syscall path let sysmon hand the goroutine's P to another
// thread during it and park a thread after it.
type sender struct {
	nc    net.Conn
	raw   *rawsock.Conn // nc's raw writev on plain TCP; nil for TLS and wrapped connections
	wake  chan struct{}
	done  chan struct{} // closed when run returns
	stop  chan struct{} // closed to make run return
	gate  func() error  // blocks while the connection is frozen
	onErr func(error)

	mu        sync.Mutex
	segs      [][]byte // queued segments, in order
	arena     []byte   // copied small bytes; segs reference it
	mark      int      // arena[mark:] not yet in segs
	rel       []func() // run once the queued bytes were written
	spares    [][]byte // free arenas
	spareSegs [][]byte
	arenaCap  int  // capacity of new arenas
	flushEnd  bool // close the connection once the queue is empty
	writing   bool // a goroutine is in drain
	dead      bool

	bufs net.Buffers // the batch being written (the writer's; a field, so that a write allocates nothing)
}

func newSender(nc net.Conn, gate func() error, onErr func(error)) *sender {
	return &sender{nc: nc, raw: rawsock.New(nc), wake: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{}),
		gate: gate, onErr: onErr, arena: make([]byte, 0, strangerArenaSize), arenaCap: strangerArenaSize}
}

// grow makes new arenas full-size (the connection has a queue now).
func (s *sender) grow() {
	s.mu.Lock()
	s.arenaCap = arenaSize
	s.spares = nil
	s.mu.Unlock()
}

// send queues a PDU made of hdr (copied), data (copied when small, else
// referenced until written) and trailer (copied). release, if not nil,
// runs once data is no longer needed. The writer goroutine sends it; send
// never blocks on the network, so the reader goroutine may use it.
func (s *sender) send(hdr, data, trailer []byte, release func()) {
	if s.queue(hdr, data, trailer, release) {
		s.notify()
	}
}

// sendDirect is send for command goroutines: when no write is in progress
// the caller writes the queue itself (saving a goroutine hand-off at low
// queue depth); otherwise the active writer takes the PDU along.
func (s *sender) sendDirect(hdr, data, trailer []byte, release func()) {
	if !s.queue(hdr, data, trailer, release) {
		return
	}
	s.mu.Lock()
	if s.writing || s.dead {
		s.mu.Unlock()
		return
	}
	s.writing = true
	s.mu.Unlock()
	s.drain()
}

// queue appends a PDU; it reports whether a writer must be started (none
// is active).
func (s *sender) queue(hdr, data, trailer []byte, release func()) bool {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		if release != nil {
			release()
		}
		return false
	}
	s.arena = append(s.arena, hdr...)
	if len(data) <= smallData {
		s.arena = append(s.arena, data...)
		if release != nil {
			defer release()
		}
	} else {
		s.cutLocked()
		s.segs = append(s.segs, data)
		if release != nil {
			s.rel = append(s.rel, release)
		}
	}
	s.arena = append(s.arena, trailer...)
	idle := !s.writing
	s.mu.Unlock()
	return idle
}

func (s *sender) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) cutLocked() {
	if len(s.arena) > s.mark {
		s.segs = append(s.segs, s.arena[s.mark:len(s.arena):len(s.arena)])
	}
	s.mark = len(s.arena)
}

// takeLocked hands the queued batch to the writer; with nothing queued it
// returns no segments and keeps the arena.
func (s *sender) takeLocked() (segs [][]byte, rel []func(), arena []byte) {
	s.cutLocked()
	if len(s.segs) == 0 {
		return nil, nil, nil
	}
	segs, rel, arena = s.segs, s.rel, s.arena
	s.segs, s.rel = s.spareSegs[:0], nil
	s.mark, s.spareSegs = 0, nil
	if n := len(s.spares); n > 0 {
		s.arena, s.spares = s.spares[n-1][:0], s.spares[:n-1]
	} else {
		s.arena = make([]byte, 0, s.arenaCap)
	}
	return segs, rel, arena
}

// run is the writer goroutine: it drains the queue whenever woken and no
// other writer is active; it returns when stop is closed or the sender
// died.
func (s *sender) run() {
	defer close(s.done)
	for {
		select {
		case <-s.wake:
		case <-s.stop:
			s.kill()
			return
		}
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			return
		}
		if s.writing {
			s.mu.Unlock()
			continue
		}
		s.writing = true
		s.mu.Unlock()
		s.drain()
	}
}

// drain writes batches until the queue is empty. REQUIRES: the caller set
// s.writing; drain clears it.
func (s *sender) drain() {
	for {
		s.mu.Lock()
		segs, rel, arena := s.takeLocked()
		if len(segs) == 0 {
			s.writing = false
			end := s.flushEnd
			s.mu.Unlock()
			if end {
				s.nc.Close()
				s.kill()
			}
			return
		}
		s.mu.Unlock()
		if err := s.write(segs, rel, arena); err != nil {
			s.kill()
			s.onErr(err)
			return
		}
	}
}

func (s *sender) write(segs [][]byte, rel []func(), arena []byte) error {
	defer func() {
		for _, r := range rel {
			r()
		}
	}()
	if err := s.gate(); err != nil {
		return err
	}
	var err error
	if s.raw != nil {
		err = s.raw.Writev(segs)
	} else {
		s.bufs = net.Buffers(segs)
		_, err = tlspsk.WriteBuffers(s.nc, &s.bufs)
		s.bufs = nil
	}
	clear(segs)
	s.mu.Lock()
	if cap(arena) <= 1<<20 && len(s.spares) < 4 {
		s.spares = append(s.spares, arena[:0])
	}
	s.spareSegs = segs[:0]
	s.mu.Unlock()
	return err
}

// kill marks the sender dead and releases everything still queued.
func (s *sender) kill() {
	s.mu.Lock()
	s.dead = true
	rel := s.rel
	s.rel, s.segs = nil, nil
	s.mu.Unlock()
	for _, r := range rel {
		r()
	}
}

// flushAndClose sends what is queued and then closes the connection,
// waiting up to d for it.
func (s *sender) flushAndClose(d time.Duration) {
	s.mu.Lock()
	s.flushEnd = true
	s.mu.Unlock()
	s.notify()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		dead := s.dead
		s.mu.Unlock()
		if dead {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// shutdown stops the writer and waits for it.
func (s *sender) shutdown() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}
