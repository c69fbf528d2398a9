package target

import (
	"net"
	"sync"
	"time"
)

// smallData is the size up to which PDU data is copied into the batch
// arena instead of being written from the caller's buffer.
const smallData = 8 << 10

// sender is a connection's single writer. Producers (command goroutines
// and the reader) queue PDUs; the writer goroutine sends everything queued
// so far with one writev, so that concurrent completions share syscalls.
type sender struct {
	nc    net.Conn
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
	spare     []byte
	spareSegs [][]byte
	flushEnd  bool // close the connection after the next flush
	dead      bool
}

func newSender(nc net.Conn, gate func() error, onErr func(error)) *sender {
	return &sender{nc: nc, wake: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{}),
		gate: gate, onErr: onErr, arena: make([]byte, 0, 64<<10)}
}

// send queues a PDU made of hdr (copied), data (copied when small, else
// referenced until written) and trailer (copied). release, if not nil,
// runs once data is no longer needed.
func (s *sender) send(hdr, data, trailer []byte, release func()) {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		if release != nil {
			release()
		}
		return
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
	s.mu.Unlock()
	s.notify()
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

// takeLocked hands the queued batch to the writer.
func (s *sender) takeLocked() (segs [][]byte, rel []func(), arena []byte) {
	s.cutLocked()
	segs, rel, arena = s.segs, s.rel, s.arena
	s.segs, s.rel = s.spareSegs[:0], nil
	s.arena, s.mark, s.spare, s.spareSegs = s.spare[:0], 0, nil, nil
	if s.arena == nil {
		s.arena = make([]byte, 0, 64<<10)
	}
	return segs, rel, arena
}

// run is the writer loop; it returns when stop is closed, a write fails,
// or the connection is to be closed after a flush.
func (s *sender) run() {
	defer close(s.done)
	defer s.kill()
	for {
		select {
		case <-s.wake:
		case <-s.stop:
			return
		}
		for {
			s.mu.Lock()
			segs, rel, arena := s.takeLocked()
			end := s.flushEnd
			s.mu.Unlock()
			if len(segs) == 0 {
				if end {
					s.nc.Close()
					return
				}
				break
			}
			if err := s.write(segs, rel, arena); err != nil {
				s.onErr(err)
				return
			}
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
	bufs := net.Buffers(segs)
	_, err := bufs.WriteTo(s.nc)
	clear(segs)
	s.mu.Lock()
	if cap(arena) <= 1<<20 {
		s.spare = arena[:0]
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

// flushAndClose asks the writer to send what is queued and then close the
// connection, waiting up to d for it.
func (s *sender) flushAndClose(d time.Duration) {
	s.mu.Lock()
	s.flushEnd = true
	s.mu.Unlock()
	s.notify()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
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
