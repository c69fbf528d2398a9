// Package uring is a small io_uring binding on golang.org/x/sys/unix: ring
// setup (with 128-byte SQEs for IORING_OP_URING_CMD), the mmapped submission
// and completion rings, submit and reap through io_uring_enter, and SQE
// helpers for the operations nvstripe uses (NOP, READ, WRITE, URING_CMD).
// It exists for the ublk server (package ublk); it is not a general binding.
//
// # Concurrency contract
//
// A Ring belongs to one goroutine at a time: every method, Close included,
// must be called by its owner, never concurrently. The ublk server keeps each
// queue's Ring on one goroutine locked to its OS thread, because the ublk
// driver wants the thread that fetched a request to commit it; the Ring does
// not lock threads itself. Close does not wake an owner blocked in Wait (it
// cannot: the owner is the only caller); requests that never complete are the
// caller's to end first (for ublk, STOP_DEV completes them).
//
// # Memory ordering
//
// The rings are shared with the kernel. Their heads and tails are read and
// written only with sync/atomic, which in Go is sequentially consistent and so
// at least as strong as the acquire/release pairs the io_uring ABI asks for:
//
//   - submission: the SQE and its index in the SQ array are written with
//     plain stores, then the SQ tail is published with an atomic store
//     (release), so the kernel never sees a tail before the entry; the SQ head
//     (advanced by the kernel) is read with an atomic load (acquire) before a
//     slot is reused;
//   - completion: the CQ tail (advanced by the kernel) is read with an atomic
//     load (acquire) before the CQEs below it are read, and the CQ head is
//     advanced with an atomic store (release) only after the CQE was copied
//     out, so the kernel never overwrites an entry still being read.
//
// The sqring flags word (IORING_SQ_CQ_OVERFLOW) is read atomically too.
//
// # Full rings and overflow
//
// SQE returns ErrSQFull when every submission slot holds an entry the kernel
// has not consumed; the caller submits (Submit) and tries again. Nothing
// blocks. When more completions arrive than the CQ holds, a kernel with
// IORING_FEAT_NODROP (5.5+) keeps the extra ones on an internal list and sets
// IORING_SQ_CQ_OVERFLOW; Peek reports none left while Wait and Flush enter the
// kernel, which moves them into the ring as space frees up, so none is lost.
// On a kernel without NODROP the extra ones are dropped and counted in
// Overflow. A submit refused with EBUSY because the overflow list is not
// drained returns an error of class ErrCQOverflow: reap, then submit again.
//
// # Memory handed to the kernel
//
// Buffers whose addresses go into SQEs (READ/WRITE data, URING_CMD payload
// pointers) must stay allocated and unmoved until their completion is reaped.
// Go's heap does not move objects, but the garbage collector frees what is
// unreachable: keep such buffers referenced (or pinned with runtime.Pinner, or
// outside the Go heap, as ublk does with mmapped buffers). After Close the
// rings are unmapped and every method returns ErrClosed; the kernel keeps its
// own reference to the ring memory and cancels what is still in flight, so
// closing with requests in flight neither hangs nor touches unmapped memory,
// but the kernel may still complete a request into its buffer afterwards.
package uring
