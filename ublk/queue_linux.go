package ublk

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/ublk/uring"
)

// eventTag is the user data of the eventfd read through which IO goroutines
// wake their queue; request tags are below maxDepth.
const eventTag = 1 << 32

// queue serves one hardware queue of the device: its goroutine is locked to
// an OS thread, which fetches every tag and commits every result (the driver
// refuses commands from another task). Requests on a synchronous device run
// on that thread; others run on goroutines that hand their result back
// through done and an eventfd read on the queue's ring.
type queue struct {
	id       uint16
	depth    int
	maxIO    int
	enc      Encoding
	cfd      int // /dev/ublkcN
	dev      blockdev.Device
	readOnly bool
	inline   bool // run IO on the queue thread (blockdev.Synchronous)

	ring  *uring.Ring
	descs []byte // the driver's ublksrv_io_desc array, mapped read-only
	bufs  []byte // depth*maxIO of data buffers plus 8 bytes for the eventfd read
	efd   int

	mu   sync.Mutex
	done []completion // results waiting for the queue thread to commit
	busy sync.WaitGroup
}

type completion struct {
	tag uint16
	res int32
}

// descAreaSize is the per-queue stride of the descriptor mmap, and
// descLen the mapped length of a queue of depth tags.
func descAreaSize(page int) int   { return roundUp(maxDepth*ioDescSize, page) }
func descLen(depth, page int) int { return roundUp(depth*ioDescSize, page) }
func roundUp(n, to int) int       { return (n + to - 1) / to * to }

// run sets the queue up on a locked thread, reports the setup's outcome on
// ready, then serves requests until the driver aborts every tag (STOP_DEV or
// a dying device). It returns the first unexpected command failure.
func (q *queue) run(ctx context.Context, ready chan<- error) (err error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	if err := q.setup(); err != nil {
		q.teardown()
		ready <- err
		return err
	}
	ready <- nil
	defer q.teardown()
	return q.loop(ctx)
}

func (q *queue) setup() error {
	page := unix.Getpagesize()
	var err error
	if q.ring, err = uring.New(uint32(q.depth+1), &uring.Options{Flags: uring.SetupSQE128}); err != nil {
		return fmt.Errorf("queue %d ring: %w", q.id, err)
	}
	off := int64(q.id) * int64(descAreaSize(page))
	if q.descs, err = unix.Mmap(q.cfd, off, descLen(q.depth, page), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("queue %d: mmap of the IO descriptors: %w", q.id, err)
	}
	if q.bufs, err = unix.Mmap(-1, 0, q.depth*q.maxIO+8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return fmt.Errorf("queue %d: IO buffers: %w", q.id, err)
	}
	if q.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("queue %d: eventfd: %w", q.id, err)
	}
	for tag := range q.depth {
		if err := q.command(ioFetchReq, uint16(tag), 0); err != nil {
			return err
		}
	}
	q.armEvent()
	_, err = q.ring.Submit()
	return err
}

func (q *queue) teardown() {
	if q.ring != nil {
		q.ring.Close()
	}
	if q.efd > 0 {
		unix.Close(q.efd)
	}
	for _, m := range [][]byte{q.descs, q.bufs} {
		if m != nil {
			unix.Munmap(m)
		}
	}
}

func (q *queue) buf(tag uint16) []byte {
	return q.bufs[int(tag)*q.maxIO : (int(tag)+1)*q.maxIO]
}

// command queues FETCH_REQ or COMMIT_AND_FETCH_REQ for tag; it goes to the
// driver at the ring's next submit.
func (q *queue) command(nr uint32, tag uint16, res int32) error {
	sqe, err := q.ring.SQE()
	if err != nil {
		return fmt.Errorf("queue %d tag %d: %w", q.id, tag, err)
	}
	var cmd [ioCmdSize]byte
	encodeIOCmd(cmd[:], q.id, tag, res, uint64(uintptr(unsafe.Pointer(&q.buf(tag)[0]))))
	return q.ring.PrepCmd(sqe, q.cfd, q.enc.ioOp(nr), cmd[:], uint64(tag))
}

func (q *queue) armEvent() {
	if q.inline {
		return
	}
	sqe, err := q.ring.SQE()
	if err != nil {
		return // cannot happen: the ring has depth+1 slots
	}
	sqe.PrepRead(q.efd, uintptr(unsafe.Pointer(&q.bufs[q.depth*q.maxIO])), 8, -1, eventTag)
}

func (q *queue) loop(ctx context.Context) error {
	var firstErr error
	for aborted := 0; aborted < q.depth; {
		c, err := q.ring.Wait()
		if err != nil {
			return fmt.Errorf("queue %d: %w", q.id, err)
		}
		switch {
		case c.UserData == eventTag:
			q.commitDone()
			q.armEvent()
		case c.Res == 0: // UBLK_IO_RES_OK: a request for this tag
			q.dispatch(ctx, uint16(c.UserData))
		default: // ABORT (-ENODEV) when the device stops, else a refused command
			aborted++
			if c.Res != ioResAbort && firstErr == nil {
				firstErr = &CmdError{Cmd: "COMMIT_AND_FETCH_REQ", DevID: uint32(q.id), Errno: syscall.Errno(-c.Res)}
			}
		}
	}
	q.busy.Wait() // every tag is aborted, so no request is still being served
	return firstErr
}

func (q *queue) dispatch(ctx context.Context, tag uint16) {
	r := decodeDesc(q.descs[int(tag)*ioDescSize:])
	if q.inline {
		q.command(ioCommitAndFetch, tag, serve(ctx, q.dev, r, q.buf(tag), q.readOnly))
		return
	}
	q.busy.Add(1)
	go func() {
		defer q.busy.Done()
		res := serve(ctx, q.dev, r, q.buf(tag), q.readOnly)
		q.mu.Lock()
		q.done = append(q.done, completion{tag, res})
		q.mu.Unlock()
		one := [8]byte{1}
		unix.Write(q.efd, one[:])
	}()
}

func (q *queue) commitDone() {
	q.mu.Lock()
	done := q.done
	q.done = nil
	q.mu.Unlock()
	for _, c := range done {
		q.command(ioCommitAndFetch, c.tag, c.res)
	}
}
