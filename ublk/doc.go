// Package ublk serves a blockdev.Device as a Linux block device,
// /dev/ublkbN, through the kernel's ublk driver (ublk_drv, Linux 6.0+):
// the kernel hands block requests to this process over io_uring (package
// uring) instead of a socket, as NBD does.
//
// # Life of a device
//
// Start opens /dev/ublk-control and sends, as IORING_OP_URING_CMD commands
// on a ring of 128-byte SQEs: ADD_DEV (any free ID; queues, depth and the
// largest request, which the driver may lower), SET_PARAMS (logical and
// physical block size and io_min from the device's block size, io_opt from
// its optimal IO size, max request, a volatile cache with FUA, discard and
// write-zeroes limits of 1 GiB in units of the block size, read-only when
// asked), then opens /dev/ublkcN, starts the queues and sends START_DEV,
// which the driver holds until every queue has fetched every tag, and
// GET_DEV_INFO to check the device is live. Close, or cancelling Start's
// context, sends STOP_DEV (the driver removes /dev/ublkbN after requests in
// progress complete and aborts the fetched tags), waits for the queues,
// closes /dev/ublkcN and sends DEL_DEV, which frees the ID.
//
// Command numbers: the 6.0-6.3 drivers know only the legacy numbers (0x02
// GET_DEV_INFO ... 0x20 FETCH_REQ); 6.4+ also take ioctl-style ones
// (_IOWR('u', nr, size)), and only those when built without
// CONFIG_BLKDEV_UBLK_LEGACY_OPCODES. ADD_DEV is tried ioctl-encoded first; a
// driver that answers ENODEV or EOPNOTSUPP gets it again in the legacy form,
// and the encoding that worked is used for every later command, IO commands
// included (Server.Encoding).
//
// # Queues
//
// Each queue has its own goroutine locked to an OS thread, its own io_uring
// and a mapping of the driver's request descriptors (/dev/ublkcN at offset
// queue × round_up(4096 × 24, page), read-only). The driver accepts commands
// for a tag only from the thread that fetched it, so that thread issues every
// FETCH_REQ and COMMIT_AND_FETCH_REQ. Every tag owns a MaxIO buffer (anonymous
// mmap, outside the Go heap) whose address goes with its commands: the driver
// copies WRITE data into it before handing the request over and READ data
// out of it when the result is committed (the 6.1 ABI; no USER_COPY or zero
// copy). Requests to a blockdev.Synchronous device run on the queue thread;
// others run on a goroutine each, which queues its result and writes an
// eventfd that the queue thread reads through its ring, so one wait covers
// both new requests and finished ones.
//
// # Requests
//
// READ and WRITE call ReadAt and WriteAt (WRITE with FUA: blockdev.WriteFUA);
// FLUSH calls Flush; DISCARD calls Trim; WRITE_ZEROES calls WriteZeroes with
// NOUNMAP and Trim without (both leave zeros); DISCARD and WRITE_ZEROES with
// FUA are followed by Flush. The result is the byte count for READ and WRITE
// and 0 otherwise. Errors: blockdev.ErrFenced and writes to a read-only
// device give -EPERM (a refusal rather than a media error, as in package
// nbd), ErrInvalid and ErrOutOfRange -EINVAL, anything else (ErrUnavailable,
// ErrCorrupt, ...) -EIO; an unknown operation -EOPNOTSUPP.
//
// # When the server dies
//
// The 6.1 driver checks every 5 s (UBLK_DAEMON_MONITOR_PERIOD) whether a
// queue's thread is exiting. After kill -9 of a server without recovery it
// then fails the requests the dead process held with EIO, removes
// /dev/ublkbN (del_gendisk, so a mounted file system sees IO errors, not a
// hang) and marks the device dead, but /dev/ublkcN and the ID stay until
// someone sends DEL_DEV: Delete does that for a device left behind.
//
// With Options.Recovery the device is added with UBLK_F_USER_RECOVERY and
// UBLK_F_USER_RECOVERY_REISSUE: the driver then quiesces the device instead
// (/dev/ublkbN stays, new IO waits, requests the dead server held are issued
// again later), and Recover in a new process sends START_USER_RECOVERY
// (retried while the driver answers EBUSY: the old process's files are not
// released or the device is not quiesced yet), starts fresh queues and sends
// END_USER_RECOVERY, after which the waiting IO runs against the new server.
// The device must be served from the same data (a Mem device dies with its
// process; a file or a volume does not).
//
// # Concurrency
//
// Start, Close and Wait may be called from any goroutine; the Device is
// called concurrently from the queue goroutines and the IO goroutines, as
// blockdev.Device allows.
package ublk
