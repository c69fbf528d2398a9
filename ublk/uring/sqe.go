package uring

import (
	"errors"
	"unsafe"
)

// Opcodes (enum io_uring_op in include/uapi/linux/io_uring.h).
const (
	OpNop         = 0
	OpAsyncCancel = 14
	OpRead        = 22
	OpWrite       = 23
	OpURingCmd    = 46
)

// Setup flags (IORING_SETUP_*) accepted in Options.Flags.
const (
	SetupCQSize       = 1 << 3  // Options.CQEntries sets the CQ size
	SetupCoopTaskrun  = 1 << 8  // no IPI to the submitter for task work (5.19+)
	SetupSQE128       = 1 << 10 // 128-byte SQEs: 80 bytes of URING_CMD payload (5.19+)
	SetupSingleIssuer = 1 << 12 // one task submits (6.0+)
)

// Features reported by the kernel (IORING_FEAT_*).
const (
	FeatSingleMmap = 1 << 0
	FeatNoDrop     = 1 << 1
)

// Error classes of this package.
var (
	ErrSQFull      = errors.New("uring: submission queue full (submit first)")
	ErrClosed      = errors.New("uring: ring closed")
	ErrCQOverflow  = errors.New("uring: completion queue overflowed (reap completions first)")
	ErrUnsupported = errors.New("uring: io_uring is not available on this system")
	ErrCmdTooLarge = errors.New("uring: URING_CMD payload larger than the SQE's command area")
)

// SQE is one submission queue entry, laid out as struct io_uring_sqe (64
// bytes). In a ring set up with SetupSQE128 each slot is 128 bytes and the
// URING_CMD payload runs from Addr3 to the end of the slot (80 bytes).
type SQE struct {
	Opcode      uint8
	Flags       uint8
	IOPrio      uint16
	Fd          int32
	Off         uint64 // file offset; for URING_CMD the low 32 bits are cmd_op
	Addr        uint64
	Len         uint32
	OpFlags     uint32 // rw_flags, cancel_flags, uring_cmd_flags, ...
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	FileIndex   uint32
	Addr3       uint64
	pad2        uint64
}

// CQE is one completion queue entry (struct io_uring_cqe, 16 bytes).
type CQE struct {
	UserData uint64
	Res      int32 // result, or a negated errno
	Flags    uint32
}

// cmdOffset is where the URING_CMD payload starts inside an SQE.
const cmdOffset = unsafe.Offsetof(SQE{}.Addr3)

// PrepNop makes s a NOP that completes with res 0.
func (s *SQE) PrepNop(userData uint64) {
	s.Opcode, s.UserData = OpNop, userData
}

// PrepRead makes s a read of n bytes at addr from fd at off (off -1: the
// file position). The buffer must stay allocated until the completion is
// reaped (see the package doc).
func (s *SQE) PrepRead(fd int, addr uintptr, n uint32, off int64, userData uint64) {
	s.prepRW(OpRead, fd, addr, n, off, userData)
}

// PrepWrite is PrepRead's counterpart for writes.
func (s *SQE) PrepWrite(fd int, addr uintptr, n uint32, off int64, userData uint64) {
	s.prepRW(OpWrite, fd, addr, n, off, userData)
}

func (s *SQE) prepRW(op uint8, fd int, addr uintptr, n uint32, off int64, userData uint64) {
	s.Opcode, s.Fd, s.Addr, s.Len, s.Off, s.UserData = op, int32(fd), uint64(addr), n, uint64(off), userData
}

// PrepCancelAll makes s an ASYNC_CANCEL of every request on fd
// (IORING_ASYNC_CANCEL_FD|ALL, 5.19+).
func (s *SQE) PrepCancelAll(fd int, userData uint64) {
	const cancelAll, cancelFd = 1 << 0, 1 << 1
	s.Opcode, s.Fd, s.OpFlags, s.UserData = OpAsyncCancel, int32(fd), cancelAll|cancelFd, userData
}
