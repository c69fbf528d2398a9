package target

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// Config describes a target. Zero fields take the defaults named in their
// comments (EnsureDefaults); Validate checks the result.
type Config struct {
	// Subsystems served. At least one. The discovery subsystem
	// (pdu.DiscoveryNQN) is always served in addition and must not appear.
	Subsystems []SubsystemConfig
	// Listeners are the TCP ports (NVMe "ports"); at least one. Port IDs
	// in the discovery log are the index + 1.
	Listeners []ListenerConfig
	// ANAGroups lists the ANA group IDs that exist besides those the
	// namespaces use. Group 1 always exists. IDs run from 1 to MaxANAGroups.
	ANAGroups []uint32
	// MaxIOQueues is the number of I/O queues granted per controller.
	// Default 16.
	MaxIOQueues int
	// QueueSize is the largest queue size (CAP.MQES+1, MAXCMD). Default
	// 128; at most 1024.
	QueueSize int
	// InCapsuleDataSize is the largest in-capsule data accepted on I/O
	// queues (IOCCSZ = (64 + it)/16). Default 128 KiB, a volume's chunk:
	// a host sends such a write with its command, without the R2T round
	// trip (a PDU each way and a wakeup on both ends). It bounds no memory
	// that R2Ts do not: each command in flight may hold MaxTransferSize.
	// A multiple of 16, at least 1024 so that the I/O Connect data fits.
	InCapsuleDataSize int
	// MaxH2CData is the largest H2CData PDU accepted (ICResp MAXH2CDATA).
	// Default 256 KiB; a multiple of 4, at least 4096.
	MaxH2CData int
	// MaxR2TLength is the most data one R2T asks for; larger writes get
	// several R2Ts (as many outstanding as the host's MAXR2T allows).
	// Default 1 MiB.
	MaxR2TLength int
	// MaxTransferSize bounds one command's data (Identify MDTS: 4 KiB <<
	// MDTS). Default 1 MiB; a power of two from 16 KiB to 16 MiB.
	MaxTransferSize int
	// DeviceQueueDepth is the most I/O commands of one namespace that run
	// on its device at once. The others wait in a queue per controller,
	// and the queues take turns by bytes (deficit round robin), so that
	// one host's deep queue cannot starve another's lone command. Default
	// 32; at most 1024.
	DeviceQueueDepth int
	// HostWeights gives host NQNs a larger share of each namespace's
	// device than the others: each turn of a controller of a host with
	// weight W may start W times as many bytes. Unlisted hosts weigh 1;
	// weights run from 1 to 100.
	HostWeights map[string]int
	// DisableSuccessFlag stops the C2HData SUCCESS optimisation. By default
	// it is used only on queues whose Connect disabled SQ flow control
	// (CATTR bit 2), as nvmet and SPDK do.
	DisableSuccessFlag bool
	// DisableInlineIO makes every I/O command run on a goroutine other
	// than the reader. By default a command that arrives on an idle queue
	// (nothing in flight, nothing more received) and finds its device free
	// runs on the queue's reader goroutine, which saves a hand-off at queue
	// depth 1; a command arriving meanwhile waits for it.
	DisableInlineIO bool
	// DiscoveryKATO is the keep-alive timeout given to discovery
	// controllers that connect with KATO 0. Default 120 s; negative is
	// refused (such a controller would get no keep-alive at all).
	DiscoveryKATO time.Duration
	// ANATT is the ANA transition time reported in Identify. Default 10 s.
	ANATT time.Duration
	// MaxConnections caps the connections open at once on each listener;
	// one beyond the cap is closed as soon as it is accepted (and logged).
	// A host uses one per queue (admin + I/O). Default
	// DefaultMaxConnections; negative: no cap.
	MaxConnections int
	// MaxConnectionsPerIP caps the connections open at once from one
	// remote IP address on each listener, before anything is read from
	// them: one beyond is closed at once, the first refusal of an address
	// logged. Default 256; negative: no cap.
	MaxConnectionsPerIP int
	// MaxPendingConnections caps the connections of each listener that
	// have not finished their handshake: Connect (ICReq included) and,
	// for a host with keys, authentication. When that many are under way
	// a new one from an address with fewer than the busiest address
	// closes the busiest address's oldest (pending_evicted); one from an
	// address with as many is closed (max_pending). Kept below
	// MaxConnections, so that stalled handshakes never fill a listener.
	// Default 256, at most MaxConnections/2; negative: no cap.
	MaxPendingConnections int
	// MaxPendingPerIP caps the handshakes under way from one remote IP
	// address on each listener; one beyond is closed at once
	// (max_pending_per_ip), the first refusal of an address logged.
	// Default 64; negative: no cap.
	MaxPendingPerIP int
	// MaxConnectionsPerHost caps the queues (connections past Connect) of
	// one claimed host NQN over every listener: a Connect beyond it is
	// refused with Controller Busy, logged once with the peer's address
	// and the NQN until a queue of that host ends. Default 256; negative:
	// no cap.
	MaxConnectionsPerHost int
	// HandshakeTimeout is the time a new connection has from accept to a
	// completed Connect (ICReq included); a connection without a queue by
	// then is closed (and logged), so a stranger holds nothing for long.
	// Default 10 s.
	HandshakeTimeout time.Duration
	// AuthTimeout is the time a queue of a host with keys (HostKeys) has
	// from its Connect to a completed DH-HMAC-CHAP exchange; a queue not
	// authenticated by then is closed (and counted as auth_timeout),
	// whatever keep-alive timeout its Connect asked for. Such a queue
	// counts against MaxConnectionsPerHost only once authenticated, so a
	// stranger who claims a keyed host's NQN cannot use up that host's
	// queues. Default 5 s.
	AuthTimeout time.Duration
	// TLS turns on NVMe/TCP TLS 1.3 with a PSK: TLSOn runs it on the
	// connections that open with a ClientHello, TLSRequire on every
	// connection. Default TLSOff.
	TLS TLSMode
	// TLSKeys are the hosts' TLS keys by host NQN (ReadTLSKeys): a host's
	// TLS identity names its NQN and the subsystem, and its Connect must
	// name the same two.
	TLSKeys map[string]tlspsk.Key
	// Logf receives diagnostic messages (connections, protocol errors).
	// Default: none.
	Logf func(format string, args ...any)
}

// SubsystemConfig is one NVM subsystem.
type SubsystemConfig struct {
	// NQN names the subsystem; required, at most 223 bytes.
	NQN string
	// Serial is the Identify serial number (20 ASCII characters at most).
	// Default: derived from the NQN, so it is stable across restarts.
	Serial string
	// Model is the Identify model number (40 characters at most). Default
	// "nvstripe".
	Model string
	// Namespaces exported; NSIDs 1..1024, unique.
	Namespaces []NamespaceConfig
	// AllowedHosts lists host NQNs that may connect.
	AllowedHosts []string
	// AllowAnyHost lets every host connect. Default false: only
	// AllowedHosts.
	AllowAnyHost bool
	// NoReservations makes the subsystem answer as one without NVMe
	// reservations (Linux nvmet before 6.13, many appliances): ONCS bit 5
	// and RESCAP clear, the reservation commands invalid opcodes. For
	// testing clients against such targets. Default false.
	NoReservations bool
	// HostKeys turn on DH-HMAC-CHAP in-band authentication for hosts
	// (each is allowed too): a queue of such a host must authenticate
	// after Connect before any other command is taken.
	HostKeys []HostKey
}

// HostKey is one host's DH-HMAC-CHAP configuration.
type HostKey struct {
	HostNQN string
	// Secret is the host's secret, "DHHC-1:..." (nvme gen-dhchap-key).
	Secret string
	// CtrlSecret, optional, is the controller's secret, for hosts that
	// authenticate the controller too (bidirectional).
	CtrlSecret string
	// Hashes ("sha256", "hmac(sha384)"...) and DHGroups ("null",
	// "ffdhe2048"...) accepted, preferred first. Default: every one,
	// SHA-512 and the null group first.
	Hashes, DHGroups []string
}

// keys parses k.
func (k HostKey) keys() (auth.Keys, error) {
	var ks auth.Keys
	var err error
	if ks.Secret, err = auth.ParseSecret(k.Secret); err != nil {
		return ks, fmt.Errorf("host %s secret: %w", k.HostNQN, err)
	}
	if k.CtrlSecret != "" {
		cs, err := auth.ParseSecret(k.CtrlSecret)
		if err != nil {
			return ks, fmt.Errorf("host %s controller secret: %w", k.HostNQN, err)
		}
		ks.CtrlSecret = &cs
	}
	for _, h := range k.Hashes {
		id, err := auth.ParseHash(h)
		if err != nil {
			return ks, fmt.Errorf("host %s: %w", k.HostNQN, err)
		}
		ks.Hashes = append(ks.Hashes, id)
	}
	for _, g := range k.DHGroups {
		id, err := auth.ParseDHGroup(g)
		if err != nil {
			return ks, fmt.Errorf("host %s: %w", k.HostNQN, err)
		}
		ks.DHGroups = append(ks.DHGroups, id)
	}
	return ks, nil
}

// NamespaceConfig is one namespace.
type NamespaceConfig struct {
	// NSID is the namespace ID, 1..1024.
	NSID uint32
	// Name feeds the derived UUID/NGUID. Default "nsN".
	Name string
	// Device holds the data. Required. The target does not close it.
	Device blockdev.Device
	// UUID and NGUID identify the namespace. Zero: derived from the NQN,
	// NSID and Name, so they are stable across restarts and identical on
	// every path.
	UUID  [16]byte
	NGUID [16]byte
	// ANAGroup is the namespace's ANA group. Default 1.
	ANAGroup uint32
	// ReadOnly rejects writes with Namespace Is Write Protected.
	ReadOnly bool
	// ReservationFile, when set, keeps the namespace's reservation
	// registrations and reservation across target restarts (Identify
	// Namespace RESCAP bit 0, Report PTPLS 1): it is read by New and
	// rewritten atomically before each reservation change completes.
	// Default "": reservations live in memory only.
	ReservationFile string
}

// ListenerConfig is one TCP listener (an NVMe port).
type ListenerConfig struct {
	// Address is host:port to listen on, e.g. "127.0.0.1:4420" or
	// "127.0.0.1:0" for any free port.
	Address string
	// ANA gives the initial state of groups on this port. Default:
	// optimized for every group.
	ANA map[uint32]pdu.ANAState
}

// Limits.
const (
	MaxNamespaces  = 1024 // NN and MNAN
	MaxANAGroups   = 128  // ANAGRPMAX and NANAGRPID
	adminQueueSize = 32
	adminInCapsule = 8192
)

// EnsureDefaults fills zero fields with their defaults and derives
// namespace IDs and serial numbers.
func (c *Config) EnsureDefaults() {
	setDefault(&c.MaxIOQueues, 16)
	setDefault(&c.QueueSize, 128)
	setDefault(&c.InCapsuleDataSize, 128<<10)
	setDefault(&c.MaxH2CData, 256<<10)
	setDefault(&c.MaxR2TLength, 1<<20)
	setDefault(&c.MaxTransferSize, 1<<20)
	setDefault(&c.DeviceQueueDepth, 32)
	if c.DiscoveryKATO == 0 {
		c.DiscoveryKATO = defaultDiscoveryKATO
	}
	if c.ANATT == 0 {
		c.ANATT = 10 * time.Second
	}
	setDefault(&c.MaxConnections, DefaultMaxConnections)
	setDefault(&c.MaxConnectionsPerIP, 256)
	setDefault(&c.MaxConnectionsPerHost, 256)
	if c.MaxPendingConnections == 0 {
		c.MaxPendingConnections = 256
		if c.MaxConnections > 0 {
			c.MaxPendingConnections = max(1, min(256, c.MaxConnections/2))
		}
	}
	setDefault(&c.MaxPendingPerIP, 64)
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.AuthTimeout <= 0 {
		c.AuthTimeout = 5 * time.Second
	}
	for i := range c.Subsystems {
		s := &c.Subsystems[i]
		if s.Serial == "" {
			sum := sha256.Sum256([]byte("nvstripe-serial\x00" + s.NQN))
			s.Serial = hex.EncodeToString(sum[:10])
		}
		if s.Model == "" {
			s.Model = "nvstripe"
		}
		for j := range s.Namespaces {
			ns := &s.Namespaces[j]
			if ns.Name == "" {
				ns.Name = fmt.Sprintf("ns%d", ns.NSID)
			}
			if ns.ANAGroup == 0 {
				ns.ANAGroup = 1
			}
			u, g := DeriveNamespaceIDs(s.NQN, ns.NSID, ns.Name)
			if ns.UUID == [16]byte{} {
				ns.UUID = u
			}
			if ns.NGUID == [16]byte{} {
				ns.NGUID = g
			}
		}
	}
}

// defaultDiscoveryKATO is Config.DiscoveryKATO's default.
const defaultDiscoveryKATO = 120 * time.Second

// DefaultMaxConnections is Config.MaxConnections's default (and
// `nvstripe target serve --max-connections`'s).
const DefaultMaxConnections = 1024

func setDefault(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

// DeriveNamespaceIDs returns the UUID (RFC 9562 version 8) and NGUID that
// a namespace gets when its config names none: both come from a SHA-256 of
// the subsystem NQN, the NSID and the name, so they are stable across
// restarts and paths and differ between subsystems.
func DeriveNamespaceIDs(nqn string, nsid uint32, name string) (uuid, nguid [16]byte) {
	h := sha256.New()
	h.Write([]byte("nvstripe-ns\x00" + nqn + "\x00"))
	h.Write(binary.BigEndian.AppendUint32(nil, nsid))
	h.Write([]byte("\x00" + name))
	sum := h.Sum(nil)
	copy(uuid[:], sum[:16])
	uuid[6] = uuid[6]&0x0F | 0x80 // version 8
	uuid[8] = uuid[8]&0x3F | 0x80 // RFC variant
	copy(nguid[:], sum[16:32])
	return uuid, nguid
}

// Validate checks the configuration (after EnsureDefaults).
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Subsystems) == 0 {
		bad("no subsystems")
	}
	if len(c.Listeners) == 0 {
		bad("no listeners")
	}
	if c.QueueSize < 2 || c.QueueSize > 1024 {
		bad("queue size %d not in [2,1024]", c.QueueSize)
	}
	if c.MaxIOQueues < 1 || c.MaxIOQueues > 1024 {
		bad("max io queues %d not in [1,1024]", c.MaxIOQueues)
	}
	if c.DeviceQueueDepth < 1 || c.DeviceQueueDepth > 1024 {
		bad("device queue depth %d not in [1,1024]", c.DeviceQueueDepth)
	}
	if c.DiscoveryKATO < 0 {
		bad("discovery kato %v negative: give 0 (the default, %v) or more", c.DiscoveryKATO, defaultDiscoveryKATO)
	}
	for h, w := range c.HostWeights {
		if w < 1 || w > 100 {
			bad("host %s: weight %d not in [1,100]", h, w)
		}
	}
	if c.InCapsuleDataSize < 1024 || c.InCapsuleDataSize%16 != 0 || c.InCapsuleDataSize > 1<<20 {
		bad("in-capsule data size %d: want a multiple of 16 in [1024, 1 MiB]", c.InCapsuleDataSize)
	}
	if c.MaxH2CData < 4096 || c.MaxH2CData%4 != 0 {
		bad("max h2c data %d: want a multiple of 4, at least 4096", c.MaxH2CData)
	}
	if c.MaxR2TLength < 4096 {
		bad("max r2t length %d below 4096", c.MaxR2TLength)
	}
	if mdts(c.MaxTransferSize) < 0 {
		bad("max transfer size %d: want 4 KiB * 2^n, 16 KiB to 16 MiB", c.MaxTransferSize)
	}
	for i, l := range c.Listeners {
		for g, st := range l.ANA {
			if g == 0 || g > MaxANAGroups || !st.Valid() {
				bad("listener %d: ana group %d state %v invalid", i, g, st)
			}
		}
	}
	for _, g := range c.ANAGroups {
		if g == 0 || g > MaxANAGroups {
			bad("ana group %d not in [1,%d]", g, MaxANAGroups)
		}
	}
	if c.TLS != TLSOff && len(c.TLSKeys) == 0 {
		bad("tls %v without host keys: no host could connect over TLS", c.TLS)
	}
	c.validateSubsystems(bad)
	return errors.Join(errs...)
}

func (c *Config) validateSubsystems(bad func(string, ...any)) {
	nqns := map[string]bool{pdu.DiscoveryNQN: true}
	for _, s := range c.Subsystems {
		if s.NQN == "" || len(s.NQN) > pdu.NQNMaxLen || !printable(s.NQN) {
			bad("subsystem nqn %q invalid", s.NQN)
		}
		if nqns[s.NQN] {
			bad("subsystem nqn %q used twice (or the discovery nqn)", s.NQN)
		}
		nqns[s.NQN] = true
		if len(s.Serial) > 20 || !printable(s.Serial) || len(s.Model) > 40 || !printable(s.Model) {
			bad("subsystem %s: serial/model too long or not ASCII", s.NQN)
		}
		ids := map[uint32]bool{}
		for _, ns := range s.Namespaces {
			if ns.NSID == 0 || ns.NSID > MaxNamespaces || ids[ns.NSID] {
				bad("subsystem %s: nsid %d invalid or repeated", s.NQN, ns.NSID)
			}
			ids[ns.NSID] = true
			if ns.Device == nil {
				bad("subsystem %s: nsid %d has no device", s.NQN, ns.NSID)
			}
			if ns.ANAGroup == 0 || ns.ANAGroup > MaxANAGroups {
				bad("subsystem %s: nsid %d ana group %d invalid", s.NQN, ns.NSID, ns.ANAGroup)
			}
		}
	}
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7E {
			return false
		}
	}
	return true
}

// mdts returns the MDTS value for a max transfer size, or -1.
func mdts(size int) int {
	for n := 2; n <= 12; n++ {
		if 4096<<n == size {
			return n
		}
	}
	return -1
}

// groups returns every ANA group ID of the configuration, ascending.
func (c *Config) groups() []uint32 {
	set := map[uint32]bool{1: true}
	for _, g := range c.ANAGroups {
		set[g] = true
	}
	for _, s := range c.Subsystems {
		for _, ns := range s.Namespaces {
			set[ns.ANAGroup] = true
		}
	}
	for _, l := range c.Listeners {
		for g := range l.ANA {
			set[g] = true
		}
	}
	out := make([]uint32, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
