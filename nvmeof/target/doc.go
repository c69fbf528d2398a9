// Package target is a userspace NVMe/TCP target: it serves
// blockdev.Devices as namespaces of one or more NVM subsystems over one or
// more TCP listeners, with ANA groups, a discovery controller and fault
// hooks for tests.
//
// # Model
//
// A Target has subsystems (NQN, serial, model, namespaces, allowed hosts),
// listeners (NVMe ports; port ID = index + 1) and ANA groups whose state is
// kept per listener and changed with SetANAState, which sends an
// ANA-change asynchronous event to every controller on that listener. The
// discovery subsystem (nqn.2014-08.org.nvmexpress.discovery) is served on
// every listener; its log lists every subsystem the host may reach on every
// listener. Controllers use the dynamic model: each admin Connect creates
// one, with a target-wide unique controller ID.
//
// # Connections
//
// Each TCP connection is one queue. A reader goroutine parses PDUs (package
// pdu), runs fabrics and admin commands in order and hands I/O commands to
// their namespace's scheduler, so many commands run at once and complete
// in any order: at most Config.DeviceQueueDepth per namespace on its
// device, the rest waiting in a queue per controller, the queues taking
// turns by bytes (deficit round robin), so that one host's deep queue
// cannot starve another's lone command. One writer goroutine per
// connection sends everything queued so far in a single writev. Writes larger than the in-capsule size are fetched with
// R2Ts of at most MaxR2TLength bytes, one outstanding per command. Reads
// answer with one C2HData PDU; SUCCESS replaces the CapsuleResp only when
// the queue's Connect disabled SQ flow control. A malformed or oversized
// PDU gets a C2HTermReq (FES/FEI from pdu.FatalError) and the connection
// closes; command-level errors get NVMe status codes.
//
// # Running a target
//
// `nvstripe target serve` is New and Start over namespaces kept in files
// (OpenFileNamespaces, CloseNamespaces after Close), with the run-time
// control API (ControlHandler) served only behind a bearer token, loopback
// included (ServeControl), and called by ControlClient. It refuses requests
// a web page may send (an Origin header, a Host header naming a host) and
// changes state only on a POST with a JSON body.
//
// # Strangers
//
// A connection has Config.HandshakeTimeout from accept to a completed
// Connect. Until then it gets small buffers, PDUs of at most Connect's
// 1 KiB of data, and only Connect is taken (one R2T transfer at a time).
// A queue of a host with keys then has Config.AuthTimeout to authenticate,
// and counts against MaxConnectionsPerHost only once it has. Connections
// in either phase are budgeted per listener by accept.Pending
// (MaxPendingPerIP, MaxPendingConnections).
//
// # Linux host interop
//
// Identify Controller: CNTLID from Connect, VER/VS 1.4, CMIC 0x0B
// (multi-port, multi-controller, ANA), MDTS from MaxTransferSize, OAES
// namespace-attribute + ANA change, CTRATT 128-bit host ID + TBKAS (any
// command counts as keep-alive traffic, as in nvmet), KAS 1 (100 ms),
// ANATT, ANACAP 0x1F, ANAGRPMAX = NANAGRPID = 128, SQES 0x66, CQES 0x44,
// MAXCMD = QueueSize, NN = MNAN = 1024, ONCS DSM + Write Zeroes +
// reservations, VWC 1, SGLS
// bit 0 + bit 20, IOCCSZ (64+InCapsuleDataSize)/16, IORCSZ 1, ICDOFF 0,
// MSDBD 1, SUBNQN. CAP: MQES, TO 15, CSS NVM only (so hosts keep CC.CSS 0).
// ICResp: CPDA 0, digests as requested, MAXH2CDATA. Namespaces are shared
// (NMIC 1), report DLFEAT 0x09, their ANA group, NGUID, and a descriptor
// list with UUID, NGUID and CSI. RESCAP: all six reservation types,
// IEKEY as in NVMe 1.3, and PTPL when the namespace has a ReservationFile.
//
// # Reservations
//
// Register, Acquire (acquire, preempt, preempt-and-abort), Release
// (release, clear) and Report (extended data structure only, as in
// nvmet) act per namespace; registrants are host IDs from Connect, so all
// controllers of a host share a registration and one node may hold
// several identities. Write, Flush, Write Zeroes and Dataset Management
// (and Read under the exclusive-access types) from a host without access
// fail with Reservation Conflict (0x83) with DNR. The generation counts
// successful registers, preempts and clears. Preempt-and-abort completes
// only after every command of the preempted hosts on the namespace that
// passed the reservation check has finished its device IO: each I/O
// command holds its controller's per-namespace gate in read mode from the
// check to the end of its device IO, and the preempt takes the gates of
// the preempted hosts' controllers in write mode once the new state is
// published; a controller whose association has ended still counts until
// its last connection has finished its commands. With NamespaceConfig.ReservationFile the state is written
// (temporary file, fsync, rename, directory fsync) before the command
// completes and read back by New; without it, it lives in memory. The
// Register command's CPTPL field is ignored: persistence is the
// namespace's configuration. Reservation notifications (log page 0x80,
// its asynchronous event) are not implemented.
//
// # Concurrency
//
// All exported methods are safe for concurrent use. Close waits for every
// goroutine the target started.
package target
