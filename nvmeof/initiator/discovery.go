package initiator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// errClosed is the cause of IO after Close.
var errClosed = errors.New("nvme/tcp: device closed")

// DiscoveryEntry is one record of a discovery log page: a subsystem (or
// another discovery service) and the port it is reachable on.
type DiscoveryEntry = pdu.DiscoveryEntry

// DiscoverOptions configure Discover. Zero fields take the Options
// defaults (HostNQN, HostID, ConnectTimeout, Dialer, digests off).
type DiscoverOptions struct {
	HostNQN      string
	HostID       [16]byte
	Timeout      time.Duration // whole exchange; default 10s
	Dialer       Dialer
	HeaderDigest bool
	DataDigest   bool
	TLSKey       string // Options.TLSKey, for a target that requires TLS
}

// Discover connects to the discovery controller at addr ("host:port"),
// reads the whole discovery log page (0x70) and disconnects. The log is
// read header first, then in full, and read again if its generation
// counter moved meanwhile.
func Discover(ctx context.Context, addr string, do DiscoverOptions) ([]DiscoveryEntry, error) {
	o := Options{HostNQN: do.HostNQN, HostID: do.HostID, ConnectTimeout: do.Timeout, Dialer: do.Dialer,
		HeaderDigest: do.HeaderDigest, DataDigest: do.DataDigest, TLSKey: do.TLSKey, SubsysNQN: pdu.DiscoveryNQN, Paths: []string{addr}}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.KATO = 0 // discovery controllers need no keep-alive for one short exchange
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	c, err := connectController(ctx, &o, addr, pdu.DiscoveryNQN, true)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.fail(fmt.Errorf("discovery: %w", context.Cause(ctx))) })
	defer stop()
	defer c.shutdown(time.Second)
	if c.id.CNTRLTYPE != 0 && c.id.CNTRLTYPE != pdu.CtrlTypeDisc {
		return nil, blockdev.Mark(fmt.Errorf("nvme/tcp %s: controller type %d is not a discovery controller",
			addr, c.id.CNTRLTYPE), blockdev.ErrInvalid)
	}
	for attempt := 0; attempt < 4; attempt++ {
		l, again, err := c.readDiscoveryLog(ctx)
		if err != nil {
			return nil, blockdev.Mark(fmt.Errorf("nvme/tcp %s: discovery log: %w", addr, err), blockdev.ErrUnavailable)
		}
		if !again {
			return l.Entries, nil
		}
	}
	return nil, blockdev.Mark(fmt.Errorf("nvme/tcp %s: discovery log kept changing", addr), blockdev.ErrUnavailable)
}

// readDiscoveryLog reads the log once; again is true when the generation
// counter changed between the header read and the full read.
func (c *controller) readDiscoveryLog(ctx context.Context) (pdu.DiscoveryLog, bool, error) {
	hdr, err := c.getLog(ctx, pdu.LogDiscovery, pdu.DiscLogHdrLen)
	if err != nil {
		return pdu.DiscoveryLog{}, false, err
	}
	n := pdu.DiscoveryNumRec(hdr)
	if n > 4096 {
		return pdu.DiscoveryLog{}, false, fmt.Errorf("%d records is implausible: %w", n, blockdev.ErrCorrupt)
	}
	full, err := c.getLog(ctx, pdu.LogDiscovery, pdu.DiscLogHdrLen+int(n)*pdu.DiscEntryLen)
	if err != nil {
		return pdu.DiscoveryLog{}, false, err
	}
	l, err := pdu.ParseDiscoveryLog(full)
	if err != nil {
		return l, false, blockdev.Mark(err, blockdev.ErrCorrupt)
	}
	return l, binary.LittleEndian.Uint64(hdr) != l.GenCtr, nil
}

// getLog reads n bytes (a multiple of 4) of log page lid from offset 0.
func (c *controller) getLog(ctx context.Context, lid uint8, n int) ([]byte, error) {
	buf := make([]byte, n)
	g := pdu.GetLogPageCmd{LID: lid, NumD: uint32(n / 4)}
	r := &request{op: fmt.Sprintf("get log page 0x%02x", lid), sqe: g.SQE(0, 0), data: buf, dir: dirC2H}
	_, err := c.admin.do(ctx, r)
	return buf, err
}
