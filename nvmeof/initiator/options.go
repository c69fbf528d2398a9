package initiator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
)

// DefaultHostNQN is the host NQN used when Options.HostNQN is empty.
const DefaultHostNQN = "nqn.2014-08.org.nvmexpress:uuid:6e767374-7269-7065-0000-000000000000"

// Options configure a Device. Zero fields take the documented defaults
// (EnsureDefaults); Validate rejects what cannot work.
type Options struct {
	// HostNQN identifies this host to the target (checked against the
	// subsystem's allow list). Default DefaultHostNQN.
	HostNQN string
	// HostID is the 16-byte host identifier sent in Connect. Default: derived
	// from HostNQN (stable for a given NQN).
	HostID [16]byte
	// DHCHAPSecret is this host's DH-HMAC-CHAP secret ("DHHC-1:...", as
	// nvme gen-dhchap-key makes), used when a target requires in-band
	// authentication. Default none: such targets are refused.
	DHCHAPSecret string
	// DHCHAPCtrlSecret, with DHCHAPSecret, makes the authentication
	// bidirectional: the target must prove it holds this secret.
	DHCHAPCtrlSecret string
	// TLSKey is this host's NVMe/TCP TLS key ("NVMeTLSkey-1:...", as
	// gen-tls-key makes). When set every connection runs TLS 1.3 with the
	// PSK derived for this host and the subsystem before ICReq. Default
	// none: plaintext.
	TLSKey string
	// SubsysNQN is the subsystem to connect to. Required.
	SubsysNQN string
	// NSID is the namespace to use. Default 1.
	NSID uint32
	// Paths are the "host:port" addresses of the subsystem's listeners, one
	// controller per path. Required, at least one.
	Paths []string
	// IOQueues is the number of I/O queues (TCP connections) per path,
	// 1..MaxIOQueues. Default 4. The target may grant fewer.
	IOQueues int
	// QueueDepth is the number of commands in flight per I/O queue, 2..1024.
	// Default 128.
	QueueDepth int
	// KATO is the keep-alive timeout sent in Connect; a Keep Alive goes out
	// every KATO/2. Default 5s. Must be at least 100ms.
	KATO time.Duration
	// HeaderDigest and DataDigest ask for CRC32C digests. Default off.
	HeaderDigest, DataDigest bool
	// ControllerLossTimeout is how long IO waits for some path to become
	// usable before failing with blockdev.ErrUnavailable. Default 30s.
	ControllerLossTimeout time.Duration
	// ReconnectBackoff is the first delay between reconnect attempts of a
	// dead path; it doubles up to MaxReconnectBackoff. Default 500ms.
	ReconnectBackoff time.Duration
	// MaxReconnectBackoff caps the reconnect delay. Default 10s.
	MaxReconnectBackoff time.Duration
	// IOTimeout bounds one command on the wire. A command that takes longer
	// resets its connection (like the Linux host's error recovery) and is
	// retried on another path. Default 30s.
	IOTimeout time.Duration
	// ConnectTimeout bounds bringing up one controller (dial, ICReq,
	// Connect, enable, Identify). Default 10s.
	ConnectTimeout time.Duration
	// MaxInCapsule caps the write size sent inside the command capsule; the
	// effective limit is min(MaxInCapsule, the controller's IOCCSZ*16-64).
	// Larger writes go through R2T/H2CData. 0 means the default (the
	// controller's limit); -1 disables in-capsule writes.
	MaxInCapsule int
	// DisableSQFlow asks the target to disable SQ flow control (Connect
	// CATTR bit 2), which lets it complete reads with a C2HData SUCCESS flag
	// instead of a separate response. Default false (flow control on); the
	// field name keeps the zero value safe for every target.
	DisableSQFlow bool
	// HostTraddr is the local IP address the TCP connections leave from,
	// as nvme-cli's --host-traddr: a host with several NICs pins its
	// storage traffic to one. Default "": the kernel picks by route. Used
	// by the default Dialer only; CheckHostTraddr says whether this host
	// has the address.
	HostTraddr string
	// Dialer dials the TCP connections. Default a net.Dialer with KeepAlive
	// on, ConnectTimeout and HostTraddr.
	Dialer Dialer
	// Logf, when set, receives path events (connect, loss, ANA changes).
	Logf func(format string, args ...any)
}

// Dialer opens connections; *net.Dialer implements it.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// MaxIOQueues is the most Options.IOQueues Validate takes.
const MaxIOQueues = 128

// EnsureDefaults fills unset fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.HostNQN == "" {
		o.HostNQN = DefaultHostNQN
	}
	if o.HostID == ([16]byte{}) {
		o.HostID = hostIDFromNQN(o.HostNQN)
	}
	setDefault(&o.NSID, 1)
	setDefault(&o.IOQueues, 4)
	setDefault(&o.QueueDepth, 128)
	setDefault(&o.KATO, 5*time.Second)
	setDefault(&o.ControllerLossTimeout, 30*time.Second)
	setDefault(&o.ReconnectBackoff, 500*time.Millisecond)
	setDefault(&o.MaxReconnectBackoff, 10*time.Second)
	setDefault(&o.IOTimeout, 30*time.Second)
	setDefault(&o.ConnectTimeout, 10*time.Second)
	if o.Dialer == nil {
		d := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 15 * time.Second}
		if ip := net.ParseIP(o.HostTraddr); ip != nil {
			d.LocalAddr = &net.TCPAddr{IP: ip}
		}
		o.Dialer = d
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// Validate reports the first invalid field, with class blockdev.ErrInvalid.
func (o *Options) Validate() error {
	var err error
	switch {
	case o.SubsysNQN == "":
		err = errors.New("SubsysNQN is required")
	case len(o.SubsysNQN) > 223 || len(o.HostNQN) > 223:
		err = errors.New("NQNs are at most 223 bytes")
	case len(o.Paths) == 0:
		err = errors.New("at least one path is required")
	case o.NSID == 0 || o.NSID >= 0xFFFFFFFE:
		err = fmt.Errorf("NSID %d is not a valid namespace ID", o.NSID)
	case o.IOQueues < 1 || o.IOQueues > MaxIOQueues:
		err = fmt.Errorf("IOQueues %d not in 1..%d", o.IOQueues, MaxIOQueues)
	case o.QueueDepth < 2 || o.QueueDepth > maxQueueDepth:
		err = fmt.Errorf("QueueDepth %d not in 2..%d", o.QueueDepth, maxQueueDepth)
	case o.KATO < 100*time.Millisecond:
		err = fmt.Errorf("KATO %v below 100ms", o.KATO)
	case o.ControllerLossTimeout <= 0 || o.ReconnectBackoff <= 0 || o.IOTimeout <= 0 || o.ConnectTimeout <= 0:
		err = errors.New("timeouts must be positive")
	case o.MaxInCapsule < -1:
		err = fmt.Errorf("MaxInCapsule %d below -1", o.MaxInCapsule)
	case o.HostTraddr != "" && net.ParseIP(o.HostTraddr) == nil:
		err = fmt.Errorf("HostTraddr %q is not an IP address", o.HostTraddr)
	}
	if err == nil {
		err = validatePaths(o.Paths)
	}
	if err == nil {
		_, err = o.authKeys()
	}
	if err == nil {
		_, err = o.tlsKey()
	}
	if err != nil {
		return blockdev.Mark(fmt.Errorf("initiator options: %w", err), blockdev.ErrInvalid)
	}
	return nil
}

// CheckHostTraddr says whether addr (an IP address, "" for none) can be the
// source of the connections: it binds a TCP socket to it. An address that
// does not parse, or that no interface of this host has, is an error of
// class blockdev.ErrInvalid that names it.
func CheckHostTraddr(addr string) error {
	if addr == "" {
		return nil
	}
	ip := net.ParseIP(addr)
	if ip == nil {
		return blockdev.Mark(fmt.Errorf("host traddr %q is not an IP address", addr), blockdev.ErrInvalid)
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip})
	if err != nil {
		return blockdev.Mark(fmt.Errorf("host traddr %s is not an address of this host: %w", addr, err), blockdev.ErrInvalid)
	}
	return ln.Close()
}

func validatePaths(paths []string) error {
	seen := map[string]bool{}
	for _, p := range paths {
		if _, _, err := net.SplitHostPort(p); err != nil {
			return fmt.Errorf("path %q: %w", p, err)
		}
		if seen[p] {
			return fmt.Errorf("path %q given twice", p)
		}
		seen[p] = true
	}
	return nil
}

// hostIDFromNQN derives a stable 16-byte host ID from the NQN (FNV-1a over
// the bytes, spread over two 64-bit halves).
func hostIDFromNQN(nqn string) [16]byte {
	var id [16]byte
	h1, h2 := uint64(14695981039346656037), uint64(1099511628211)
	for i := 0; i < len(nqn); i++ {
		h1 = (h1 ^ uint64(nqn[i])) * 1099511628211
		h2 = (h2 ^ uint64(nqn[i])) * 14695981039346656037
	}
	for i := 0; i < 8; i++ {
		id[i] = byte(h1 >> (8 * i))
		id[8+i] = byte(h2 >> (8 * i))
	}
	id[6] = id[6]&0x0F | 0x40 // look like a version-4 UUID
	id[8] = id[8]&0x3F | 0x80
	return id
}
