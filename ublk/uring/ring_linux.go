package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmap offsets of the rings (IORING_OFF_*).
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

const (
	enterGetEvents = 1 << 0
	sqCQOverflow   = 1 << 1 // IORING_SQ_CQ_OVERFLOW in the sq flags word
	cqeSize        = 16
)

// sqOffsets and cqOffsets are struct io_sqring_offsets / io_cqring_offsets.
type sqOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

type cqOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, CQEs, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

// params is struct io_uring_params (120 bytes).
type params struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  sqOffsets
	CQOff                                                                  cqOffsets
}

// Options configures New. The zero value of a field means its default.
type Options struct {
	// Flags are IORING_SETUP_* flags (SetupSQE128, SetupCoopTaskrun, ...).
	// SetupCQSize is added when CQEntries is set.
	Flags uint32
	// CQEntries is the CQ size; default twice the SQ size (the kernel's).
	CQEntries uint32
}

// Ring is one io_uring instance. See the package doc for its concurrency
// contract and memory-ordering rules.
type Ring struct {
	fd       int
	features uint32
	sqeSize  uintptr
	ringMem  []byte // SQ ring, and the CQ ring with FeatSingleMmap
	cqMem    []byte // CQ ring without FeatSingleMmap
	sqeMem   []byte

	sqHead, sqTail, sqFlags, sqMask *uint32
	sqArray                         []uint32
	sqEntries                       uint32
	cqHead, cqTail, cqOverflow      *uint32
	cqMask, cqEntries               uint32
	cqes                            unsafe.Pointer

	tail   uint32 // next SQ tail: entries handed out by SQE
	closed bool
}

// New sets up a ring with at least entries submission slots (rounded up to
// a power of two by the kernel).
func New(entries uint32, opts *Options) (*Ring, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	p := params{Flags: o.Flags}
	if o.CQEntries != 0 {
		p.Flags |= SetupCQSize
		p.CQEntries = o.CQEntries
	}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EPERM {
			return nil, fmt.Errorf("io_uring_setup: %w (%w)", errno, ErrUnsupported)
		}
		return nil, fmt.Errorf("io_uring_setup(%d, flags %#x): %w", entries, p.Flags, errno)
	}
	r := &Ring{fd: int(fd), features: p.Features, sqeSize: 64}
	if p.Flags&SetupSQE128 != 0 {
		r.sqeSize = 128
	}
	if err := r.mapRings(&p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Ring) mapRings(p *params) error {
	sqSize := int(p.SQOff.Array + p.SQEntries*4)
	cqSize := int(p.CQOff.CQEs + p.CQEntries*cqeSize)
	single := p.Features&FeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if r.ringMem, err = mmap(r.fd, offSQRing, sqSize); err != nil {
		return err
	}
	cq := r.ringMem
	if !single {
		if r.cqMem, err = mmap(r.fd, offCQRing, cqSize); err != nil {
			return err
		}
		cq = r.cqMem
	}
	if r.sqeMem, err = mmap(r.fd, offSQEs, int(p.SQEntries)*int(r.sqeSize)); err != nil {
		return err
	}
	sq := r.ringMem
	r.sqHead, r.sqTail, r.sqFlags = u32At(sq, p.SQOff.Head), u32At(sq, p.SQOff.Tail), u32At(sq, p.SQOff.Flags)
	r.sqMask, r.sqEntries = u32At(sq, p.SQOff.RingMask), p.SQEntries
	r.sqArray = unsafe.Slice(u32At(sq, p.SQOff.Array), p.SQEntries)
	r.cqHead, r.cqTail, r.cqOverflow = u32At(cq, p.CQOff.Head), u32At(cq, p.CQOff.Tail), u32At(cq, p.CQOff.Overflow)
	r.cqMask, r.cqEntries = *u32At(cq, p.CQOff.RingMask), p.CQEntries
	r.cqes = unsafe.Pointer(&cq[p.CQOff.CQEs])
	r.tail = atomic.LoadUint32(r.sqTail)
	return nil
}

func mmap(fd int, off int64, n int) ([]byte, error) {
	b, err := unix.Mmap(fd, off, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap io_uring ring at %#x (%d bytes): %w", off, n, err)
	}
	return b, nil
}

func u32At(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// Fd returns the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// Features returns the IORING_FEAT_* bits the kernel reported.
func (r *Ring) Features() uint32 { return r.features }

// SQEntries and CQEntries return the ring sizes the kernel chose.
func (r *Ring) SQEntries() uint32 { return r.sqEntries }
func (r *Ring) CQEntries() uint32 { return r.cqEntries }

// CmdSize is the URING_CMD payload size of an SQE of this ring: 16 bytes,
// or 80 with SetupSQE128.
func (r *Ring) CmdSize() int { return int(r.sqeSize - cmdOffset) }

// SQE returns the next free submission slot, zeroed, or ErrSQFull when every
// slot holds an entry the kernel has not consumed yet (call Submit). The
// entry goes to the kernel at the next Submit or Wait.
func (r *Ring) SQE() (*SQE, error) {
	if r.closed {
		return nil, ErrClosed
	}
	head := atomic.LoadUint32(r.sqHead) // acquire: the kernel is done with slots below head
	if r.tail-head >= r.sqEntries {
		return nil, ErrSQFull
	}
	idx := r.tail & *r.sqMask
	slot := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&r.sqeMem[0]), uintptr(idx)*r.sqeSize)), r.sqeSize)
	clear(slot)
	r.sqArray[idx] = idx
	r.tail++
	return (*SQE)(unsafe.Pointer(&slot[0])), nil
}

// PrepCmd makes s (an SQE of this ring) an IORING_OP_URING_CMD with cmd_op
// op on fd, its payload copied into the SQE's command area.
func (r *Ring) PrepCmd(s *SQE, fd int, op uint32, payload []byte, userData uint64) error {
	if len(payload) > r.CmdSize() {
		return fmt.Errorf("%w: %d bytes, room for %d", ErrCmdTooLarge, len(payload), r.CmdSize())
	}
	s.Opcode, s.Fd, s.Off, s.UserData = OpURingCmd, int32(fd), uint64(op), userData
	copy(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(s), cmdOffset)), r.CmdSize()), payload)
	return nil
}

// Pending returns the number of entries prepared but not yet consumed by the
// kernel.
func (r *Ring) Pending() uint32 {
	if r.closed {
		return 0
	}
	return r.tail - atomic.LoadUint32(r.sqHead)
}

// Submit hands the prepared entries to the kernel without waiting and
// returns how many it consumed.
func (r *Ring) Submit() (int, error) { return r.enter(0, 0) }

// SubmitAndWait submits the prepared entries and waits until at least
// minComplete completions are in the CQ (reap them with Peek).
func (r *Ring) SubmitAndWait(minComplete uint32) (int, error) {
	return r.enter(minComplete, enterGetEvents)
}

func (r *Ring) enter(minComplete, flags uint32) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	atomic.StoreUint32(r.sqTail, r.tail) // release: entries are written before the tail
	for {
		toSubmit := r.tail - atomic.LoadUint32(r.sqHead)
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit),
			uintptr(minComplete), uintptr(flags), 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue // nothing submitted (else n > 0 would be returned): try again
		case unix.EBUSY, unix.EAGAIN:
			return 0, fmt.Errorf("io_uring_enter: %w (%w)", errno, ErrCQOverflow)
		default:
			return 0, fmt.Errorf("io_uring_enter(submit %d, wait %d): %w", toSubmit, minComplete, errno)
		}
	}
}

// Peek returns the next completion without entering the kernel, and false
// when the CQ is empty (completions parked on the kernel's overflow list
// come in only through Wait or Flush).
func (r *Ring) Peek() (CQE, bool) {
	if r.closed {
		return CQE{}, false
	}
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) { // acquire: CQEs below tail are written
		return CQE{}, false
	}
	c := *(*CQE)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize))
	atomic.StoreUint32(r.cqHead, head+1) // release: the slot may be reused
	return c, true
}

// Wait returns the next completion. When the CQ is empty it submits what is
// prepared and waits for one; when a completion is ready it returns it
// without entering the kernel (prepared entries go at the next Submit).
func (r *Ring) Wait() (CQE, error) {
	for {
		if c, ok := r.Peek(); ok {
			return c, nil
		}
		if _, err := r.SubmitAndWait(1); err != nil && !errors.Is(err, ErrCQOverflow) {
			return CQE{}, err
		}
	}
}

// Flush asks the kernel to move completions from its overflow list into the
// CQ (a no-op when nothing overflowed) and submits what is prepared.
func (r *Ring) Flush() error {
	_, err := r.enter(0, enterGetEvents)
	return err
}

// Overflowed reports whether the kernel holds completions on its overflow
// list (IORING_SQ_CQ_OVERFLOW).
func (r *Ring) Overflowed() bool {
	return !r.closed && atomic.LoadUint32(r.sqFlags)&sqCQOverflow != 0
}

// Overflow returns the number of completions dropped because the CQ was full
// (only without FeatNoDrop, or when the kernel could not allocate).
func (r *Ring) Overflow() uint32 {
	if r.closed {
		return 0
	}
	return atomic.LoadUint32(r.cqOverflow)
}

// Close unmaps the rings and closes the ring; the kernel cancels requests
// still in flight. Later calls return ErrClosed (Close itself returns nil).
func (r *Ring) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.ringMem} {
		if m != nil {
			errs = append(errs, unix.Munmap(m))
		}
	}
	r.sqeMem, r.cqMem, r.ringMem, r.sqArray, r.cqes = nil, nil, nil, nil, nil
	errs = append(errs, unix.Close(r.fd))
	return errors.Join(errs...)
}
