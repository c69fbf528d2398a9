package nbd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/nvstripe/nvstripe/blockdev"
)

// ErrNoKernelNBD is returned by AttachKernel where the kernel has no nbd
// driver (the generic netlink family "nbd" does not exist).
var ErrNoKernelNBD = errors.New("nbd kernel module not loaded (modprobe nbd); serve over --nbd-listen or --fuse instead")

// The kernel's generic netlink interface to the nbd driver
// (include/uapi/linux/nbd-netlink.h), family "nbd", version 1.
const (
	genlFamily  = "nbd"
	genlVersion = 1

	genlCmdConnect     = 1
	genlCmdDisconnect  = 2
	genlCmdReconfigure = 3

	attrIndex           = 1
	attrSizeBytes       = 2
	attrBlockSizeBytes  = 3
	attrTimeout         = 4
	attrServerFlags     = 5
	attrClientFlags     = 6
	attrSockets         = 7
	attrDeadConnTimeout = 8
	attrBackendID       = 10

	attrSockItem = 1 // inside attrSockets
	attrSockFD   = 1 // inside attrSockItem

	// clientFlagDisconnectOnClose disconnects the device when its last
	// opener closes it. Never set by AttachKernel: every blkid, mkfs or
	// mount/umount would end the attachment.
	clientFlagDisconnectOnClose = 1 << 1
)

// AttachOptions configure AttachKernel. The zero value of a field means its
// default.
type AttachOptions struct {
	// Connections is the number of sockets the kernel spreads IO over (the
	// export advertises CAN_MULTI_CONN). Default 4; negative is refused.
	Connections int
	// Timeout is how long the kernel waits for the reply to one request
	// (NBD_ATTR_TIMEOUT) before it declares the request's socket dead
	// (shut down: "Connection timed out" in its log) and sends the request
	// again on another. Default DefaultKernelTimeout; negative: none sent,
	// and Linux then applies the block layer's 30 s to a device with more
	// than one connection (and only warns with one). The time runs from
	// when the kernel sends a request, so it covers the queue ahead of it
	// on our side: a short one only duplicates writes that a slow but live
	// server is still doing. It is also how long requests that were in
	// flight when the serving process died wait before a process that
	// took the device over gets them (measured under the VM: a write in
	// flight at a kill -9 finished 120 s later, though the device was
	// taken over after 24 s; with Linux's 30 s it would have been 30 s).
	Timeout time.Duration
	// DeadConnTimeout is how long the kernel holds IO while no socket is
	// live, waiting for a replacement (NBD_CMD_RECONFIGURE: the attachment
	// replaces a connection whose server side ended, and a process that
	// attaches a device whose server process died replaces them all).
	// Default 2 minutes (a restarted map first waits for the volume's
	// lease, 10s, to expire, then opens the volume, resyncing what the dead
	// one left dirty); negative: fail IO at once.
	DeadConnTimeout time.Duration
	// BackendID names the backend in sysfs (/sys/block/nbdN/backend), e.g.
	// the volume name. Default: the export name.
	BackendID string
}

// DefaultKernelTimeout is AttachOptions.Timeout's default: as long as the
// kernel holds IO for a dead server (DeadConnTimeout's default), so that a
// request slowed by the volume (a queue of writeback with the write log on,
// a target's loss, a lease taken again) is waited for rather than sent
// twice. Our sockets are local pairs to a process that the kernel sees die
// at once, so a timeout never finds a lost network, only a slow backend.
const DefaultKernelTimeout = 2 * time.Minute

// defaultConnections is AttachOptions.Connections' default.
const defaultConnections = 4

// check says why o cannot attach a device (class blockdev.ErrInvalid),
// before anything is asked of the kernel: with a negative Connections it
// would be given no socket at all.
func (o AttachOptions) check() error {
	if o.Connections < 0 {
		return fmt.Errorf("nbd: Connections %d: negative: give 0 (the default, %d) or more: %w", o.Connections, defaultConnections, blockdev.ErrInvalid)
	}
	return nil
}

func (o *AttachOptions) ensureDefaults(export string) {
	switch {
	case o.Timeout == 0:
		o.Timeout = DefaultKernelTimeout
	case o.Timeout < 0:
		o.Timeout = 0
	}
	if o.Connections == 0 {
		o.Connections = defaultConnections
	}
	if o.BackendID == "" {
		o.BackendID = export
	}
	switch {
	case o.DeadConnTimeout == 0:
		o.DeadConnTimeout = 2 * time.Minute
	case o.DeadConnTimeout < 0:
		o.DeadConnTimeout = 0
	}
}

// connectRequest is the content of an NBD_CMD_CONNECT message.
type connectRequest struct {
	index      int // -1: let the kernel pick a free device
	size       uint64
	blockSize  uint64
	flags      uint64 // transmission flags
	fds        []int
	timeout    time.Duration
	deadConn   time.Duration
	backendID  string
	clientFlag uint64
}

// encodeConnect returns the netlink attributes of NBD_CMD_CONNECT.
func encodeConnect(r connectRequest) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	if r.index >= 0 {
		ae.Uint32(attrIndex, uint32(r.index))
	}
	ae.Uint64(attrSizeBytes, r.size)
	ae.Uint64(attrBlockSizeBytes, r.blockSize)
	ae.Uint64(attrServerFlags, r.flags)
	ae.Uint64(attrClientFlags, r.clientFlag)
	if r.timeout > 0 {
		ae.Uint64(attrTimeout, uint64((r.timeout+time.Second-1)/time.Second))
	}
	if r.deadConn > 0 {
		ae.Uint64(attrDeadConnTimeout, uint64((r.deadConn+time.Second-1)/time.Second))
	}
	encodeSockets(ae, r.fds)
	if r.backendID != "" {
		ae.String(attrBackendID, r.backendID)
	}
	return ae.Encode()
}

// encodeReconfigure returns the attributes of NBD_CMD_RECONFIGURE: new
// sockets for the device's dead connections, and the request timeout again
// (a device taken over from a process that set none gets ours). A device
// connected with a backend identifier refuses a reconfigure without the same one ("must
// specify backend", EINVAL, on Linux 6.1).
func encodeReconfigure(index int, fds []int, timeout, deadConn time.Duration, backendID string) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(attrIndex, uint32(index))
	if timeout > 0 {
		ae.Uint64(attrTimeout, uint64((timeout+time.Second-1)/time.Second))
	}
	if deadConn > 0 {
		ae.Uint64(attrDeadConnTimeout, uint64((deadConn+time.Second-1)/time.Second))
	}
	encodeSockets(ae, fds)
	if backendID != "" {
		ae.String(attrBackendID, backendID)
	}
	return ae.Encode()
}

// encodeResize returns the attributes of an NBD_CMD_RECONFIGURE that only
// changes the device's size (Linux 5.3+ applies NBD_ATTR_SIZE_BYTES on
// reconfigure), with the device's backend identifier.
func encodeResize(index int, size uint64, backendID string) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(attrIndex, uint32(index))
	ae.Uint64(attrSizeBytes, size)
	if backendID != "" {
		ae.String(attrBackendID, backendID)
	}
	return ae.Encode()
}

// encodeSockets adds NBD_ATTR_SOCKETS with one item per fd.
func encodeSockets(ae *netlink.AttributeEncoder, fds []int) {
	ae.Nested(attrSockets, func(nae *netlink.AttributeEncoder) error {
		for _, fd := range fds {
			nae.Nested(attrSockItem, func(item *netlink.AttributeEncoder) error {
				item.Uint32(attrSockFD, uint32(fd))
				return nil
			})
		}
		return nil
	})
}

// encodeDisconnect returns the netlink attributes of NBD_CMD_DISCONNECT.
func encodeDisconnect(index int) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(attrIndex, uint32(index))
	return ae.Encode()
}

// decodeIndex finds NBD_ATTR_INDEX in the attributes of a CONNECT reply.
func decodeIndex(b []byte) (int, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return 0, fmt.Errorf("nbd netlink reply: %w", err)
	}
	index := -1
	for ad.Next() {
		if ad.Type() == attrIndex {
			index = int(ad.Uint32())
		}
	}
	if err := ad.Err(); err != nil {
		return 0, fmt.Errorf("nbd netlink reply: %w", err)
	}
	if index < 0 {
		return 0, fmt.Errorf("nbd netlink reply without a device index")
	}
	return index, nil
}

// parseDevPath returns N of "/dev/nbdN", or -1 for "" (any free device).
func parseDevPath(p string) (int, error) {
	if p == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(p, "/dev/nbd"))
	if !strings.HasPrefix(p, "/dev/nbd") || err != nil || n < 0 {
		return 0, fmt.Errorf("nbd: device path %q is not /dev/nbdN: %w", p, blockdev.ErrInvalid)
	}
	return n, nil
}
