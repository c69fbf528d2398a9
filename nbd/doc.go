// Package nbd serves blockdev.Devices over the NBD protocol (fixed newstyle
// handshake, simple and structured replies, base:allocation block status),
// on any net.Listener: TCP or unix sockets. On Linux it can also hand
// connected sockets to the kernel's nbd driver (Server.AttachKernel, over
// generic netlink) so that a device appears as /dev/nbdN (see Kernel
// devices).
//
// # Serving
//
// A Server holds named exports (Options.Exports, AddExport, RemoveExport).
// Serve accepts connections; ServeConn serves one already-accepted
// connection. Close (or cancelling the context given to Serve/ServeConn)
// stops reading new requests, lets requests already in progress finish and
// their replies go out (for up to Options.ShutdownGrace, after which their
// device IO is cancelled and the socket closed), and returns when every
// goroutine the server started has exited.
//
// Strangers cannot hold the server: Serve serves at most
// Options.MaxConnections connections at once, and at most
// Options.MaxConnectionsPerIP from one IP address (package accept closes
// the ones beyond as soon as they are accepted, and logs it); a connection
// has Options.HandshakeTimeout from accept to enter transmission, saying
// nothing included; at most Options.MaxHandshakesPerIP connections from one
// address are in the handshake at once, and a connection that finds
// Options.MaxHandshakes full ends the oldest handshake (accept.Pending). In
// transmission a connection may idle between requests without limit, but a
// request that has begun must arrive within Options.RequestTimeout (plus
// its payload at Options.MinPayloadRate), replies must leave as promptly,
// and the WRITE payloads and READ data held at once by all connections
// stay within Options.MaxPayloadMemory (payload.go).
// Stats counts the refused and dropped connections by reason, and
// Options.Refused hears of each.
//
// Per connection a pool of worker goroutines takes turns at reading (the
// leader/follower pattern, as nbdkit's threads do): the worker whose turn it
// is reads one request (and a WRITE's payload), passes the turn on, runs the
// request and sends its reply, so a request is read, run and answered on one
// goroutine with its data in one CPU's cache. Requests in flight are bounded
// by Options.MaxInFlight and Options.MaxInFlightBytes of payload; workers are
// kept for the connection's life. A connection to a synchronous device
// (blockdev.Synchronous: in memory) keeps one worker, which runs its
// requests in turn: that IO never waits, so more workers would only add a
// thread wakeup per request (Options.PipelineSynchronous). Replies go out
// of order with no writer goroutine: the worker that finds the socket idle
// writes its own reply at once and then, in one writev, whatever replies
// others queued meanwhile. On Linux the socket is read and written with raw
// system calls (it is non-blocking, so they only copy): the scheduler then
// does not hand the goroutine's P to another thread during a long copy (see
// package rawsock).
//
// Replies are kept from piling up, so that their data is still in cache when
// it is copied into the socket: a READ starts its device IO only while fewer
// than Options.ReplyBacklog bytes of replies wait to be written, and a TCP
// connection from a loopback client (the kernel's nbd driver, qemu) gets a
// send buffer of Options.LoopbackSendBuffer instead of the kernel's
// autotuned 4 MiB. Both matter when the client drains replies slower than
// the device fills them, as a local client on the same CPUs does.
//
// # Semantics and decisions
//
//   - Block sizes: the server advertises a minimum block size of 512, a
//     preferred size of the device's optimal IO size (blockdev.OptimalIO: a
//     volume's full stripe, so that nbdcopy and qemu write whole stripes)
//     when it has one up to the maximum payload, else max(4096, device block
//     size), and a maximum payload of Options.MaxRequest. Requests not
//     aligned to 512 get EINVAL. Requests aligned to 512 but not to the
//     device's block size are served by read-modify-write of the blocks
//     they cover partly, under a lock that orders them against other writes
//     to the export (aligned writes take it shared, so they do not wait for
//     each other).
//   - CAN_MULTI_CONN is advertised: every connection to an export uses the
//     same Device and the server keeps no cache, and Device.Flush covers every
//     write completed before it, on any connection.
//   - With structured replies, a successful command other than READ gets a
//     simple reply (as nbdkit does; the protocol allows either), errors get
//     an ERROR chunk with a message, and READ gets chunks.
//   - READ with structured replies on a Device that implements
//     blockdev.AllocationReporter answers unallocated ranges with OFFSET_HOLE
//     chunks (unless DF is set, then one OFFSET_DATA chunk).
//   - WRITE_ZEROES with NO_HOLE calls Device.WriteZeroes, without it
//     Device.Trim (both leave the range reading as zeros). FAST_ZERO succeeds
//     only on a Device that implements FastZeroer and says zeroing that range
//     is fast; otherwise it fails at once with ENOTSUP, as the protocol asks,
//     and the client falls back to writing zeros.
//   - TRIM is a hint: the parts of the range that cover device blocks only
//     partly are left alone.
//   - FUA: WRITE uses blockdev.WriteFUA; TRIM and WRITE_ZEROES with FUA are
//     followed by Device.Flush.
//   - CACHE succeeds without doing anything; BLOCK_STATUS reports
//     base:allocation from blockdev.AllocationReporter (everything allocated
//     for other devices).
//   - A client that hangs up without DISC (EOF, a reply that cannot be
//     written, the socket shut down) gets none of its requests that have not
//     started their IO run: the kernel's nbd driver sends a timed-out request
//     again on another connection, and the stale copy must not overwrite
//     what was written since. A write, trim or zero polls the socket for the
//     peer's shutdown before it starts (one system call). A request already
//     in the device finishes; a Device that waits for a lock should check
//     its ctx once it holds it (volume does, per stripe). See hangup.go.
//   - Extended headers are not offered (NBD_REP_ERR_UNSUP). TLS is offered
//     through NBD_OPT_STARTTLS when Options.TLS is set (and required before
//     any other option with Options.RequireTLS); otherwise STARTTLS is
//     answered NBD_REP_ERR_UNSUP. A configuration asking for client
//     certificates is served at TLS 1.2 at most, unless it sets MaxVersion
//     (GnuTLS clients send no RSA client certificate to Go's TLS 1.3).
//
// Errors map to NBD error values as follows: request past the end of the
// export: ENOSPC for WRITE and WRITE_ZEROES, EINVAL otherwise; misaligned,
// unknown command, invalid flag, BLOCK_STATUS without a negotiated context,
// READ over MaxRequest: EINVAL; a write to a read-only export: EPERM;
// blockdev.ErrOutOfRange: as past the end; blockdev.ErrNoSpace (the
// storage behind is full): ENOSPC; blockdev.ErrInvalid: EINVAL;
// blockdev.ErrFenced (this node lost the right to write): EPERM, so the
// operator sees a refusal rather than a media error; IO cancelled by
// shutdown: ESHUTDOWN; anything else (ErrUnavailable, ErrCorrupt, ...): EIO.
// A wrong request magic, a WRITE payload over max(MaxRequest, 32 MiB) or an
// option over 64 KiB ends the connection.
//
// # Kernel devices
//
// AttachKernel hands the kernel one end of each of AttachOptions.Connections
// unix socket pairs (NBD_CMD_CONNECT, CAN_MULTI_CONN) and serves the other
// ends in transmission mode with simple replies, until Attachment.Close
// (NBD_CMD_DISCONNECT, then the device's size is 0 again) or a disconnect by
// someone else (Attachment.Done). The kernel's ends are plain blocking
// descriptors that the process closes once the kernel holds them; the
// attachment's lifetime is not the attaching context's. A connection whose
// server side ends while the device is connected gets a fresh socket
// (NBD_CMD_RECONFIGURE), and the kernel holds IO meanwhile for up to
// AttachOptions.DeadConnTimeout. A request unanswered for
// AttachOptions.Timeout (default DefaultKernelTimeout, 2 minutes, always
// sent: Linux's own 30 s shuts down sockets of a slow but live server and
// sends their writes twice) gets its socket declared dead and is sent
// again on another. The kernel's sysfs attributes (pid: the
// connecting thread; backend: AttachOptions.BackendID, nvstripe's volume
// name) tell who serves a device: a device connected by a live process is
// refused (ErrDeviceBusy), and one whose process has died is taken over by
// a process attaching the same backend, which replaces all its dead
// connections, so a restarted `nvstripe map` continues a mounted device.
// PickDevice, FreeDevice, Devices, DeviceOf, WaitSize and Detach serve the
// CLI's map and unmap.
//
// # Concurrency
//
// All Server methods may be called from any goroutine. Devices are called
// concurrently, as blockdev.Device allows.
package nbd
