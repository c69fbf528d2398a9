package volclient

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
	"github.com/nvstripe/nvstripe/placement"
)

// NamespaceOptions say how namespaces are reached.
type NamespaceOptions struct {
	// HostNQN identifies this node to the targets. Default
	// initiator.DefaultHostNQN.
	HostNQN string
	// DHCHAPSecret and DHCHAPCtrlSecret authenticate to targets that
	// require it (initiator.Options). Default none.
	DHCHAPSecret, DHCHAPCtrlSecret string
	// TLSKey, when set, runs the connections over NVMe/TCP TLS 1.3
	// (initiator.Options.TLSKey). Default none.
	TLSKey string
	// HostTraddr is the local IP address the connections to targets leave
	// from (initiator.Options.HostTraddr, nvme-cli's --host-traddr).
	// Default "": the kernel picks by route.
	HostTraddr string
	// IOQueues per path, at most initiator.MaxIOQueues. Default 2;
	// negative is refused.
	IOQueues int
	// ControllerLossTimeout is how long IO to an unreachable namespace waits
	// before it fails (and the volume reconstructs around it). Default 5s;
	// negative is refused.
	ControllerLossTimeout time.Duration
	// ConnectTimeout bounds connecting to a namespace. Default 5s; negative
	// is refused.
	ConnectTimeout time.Duration
	// Logf receives path events. Default: none.
	Logf func(format string, args ...any)
	// PathStateInterval is how often the paths of connected namespaces are
	// looked at: a path whose ANA state changed is recorded in etcd (what
	// `nvstripe ns ls` shows) and handed to OnPathState. Default 2s;
	// negative: never.
	PathStateInterval time.Duration
	// OnPathState hears each path state change (metrics). Default nil.
	OnPathState func(PathState)
	// Session, when set, is the read-write ownership session the
	// namespaces are opened for: each is connected with the session's
	// host ID and claimed for it (see Session). OpenVolume sets it for a
	// read-write owner; nil (read-only, labelling) claims nothing.
	Session *Session
}

// Session is a read-write ownership session's identity on the storage
// (package doc, "Fencing"): the host ID its connections send (the volume's
// tag and the epoch, initiator.SessionHostID) and its reservation key, the
// ownership epoch (an etcd revision, unique cluster-wide).
type Session struct {
	HostID [16]byte
	Epoch  uint64
	// Fenced is called when a namespace refuses the session: a newer
	// owner of the volume has claimed it. Required.
	Fenced func(error)
	// Logf receives a warning for each namespace that cannot fence.
	Logf func(format string, args ...any)
}

// NewSession returns the session of volume's owner epoch in cluster.
func NewSession(cluster *meta.ClusterRecord, volume string, epoch int64, fenced func(error)) *Session {
	sum := sha256.Sum256([]byte(cluster.ID + "/" + volume))
	return &Session{HostID: initiator.SessionHostID([8]byte(sum[:8]), uint64(epoch)), Epoch: uint64(epoch), Fenced: fenced}
}

// Check reports what in o cannot work on this host before anything
// connects (class blockdev.ErrInvalid): a number the initiator would
// refuse for every connection (checkLimits) and a HostTraddr that is not
// one of its addresses (initiator.CheckHostTraddr).
func (o NamespaceOptions) Check() error {
	return errors.Join(o.checkLimits(), initiator.CheckHostTraddr(o.HostTraddr))
}

// The defaults of NamespaceOptions' numbers.
const (
	defaultIOQueues       = 2
	defaultLossTimeout    = 5 * time.Second
	defaultConnectTimeout = 5 * time.Second
)

// checkLimits says which of o's numbers, defaulted, initiator.Open would
// refuse (its Options.Validate: 1..MaxIOQueues queues, timeouts above 0),
// class blockdev.ErrInvalid. It does no IO.
func (o NamespaceOptions) checkLimits() error {
	var errs []error
	if o.IOQueues < 0 || o.IOQueues > initiator.MaxIOQueues {
		errs = append(errs, fmt.Errorf("IOQueues %d: give 1 to %d, or 0 for the default, %d: %w", o.IOQueues, initiator.MaxIOQueues, defaultIOQueues, blockdev.ErrInvalid))
	}
	for _, t := range []struct {
		name   string
		d, def time.Duration
	}{{"ControllerLossTimeout", o.ControllerLossTimeout, defaultLossTimeout}, {"ConnectTimeout", o.ConnectTimeout, defaultConnectTimeout}} {
		if t.d < 0 {
			errs = append(errs, fmt.Errorf("%s %v: negative: give 0 (the default, %v) or more: %w", t.name, t.d, t.def, blockdev.ErrInvalid))
		}
	}
	return errors.Join(errs...)
}

func (o *NamespaceOptions) ensureDefaults() {
	if o.IOQueues == 0 {
		o.IOQueues = defaultIOQueues
	}
	if o.ControllerLossTimeout == 0 {
		o.ControllerLossTimeout = defaultLossTimeout
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = defaultConnectTimeout
	}
	if o.PathStateInterval == 0 {
		o.PathStateInterval = 2 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Namespaces is the volume engine's DeviceSet over etcd's namespace records:
// it connects to a namespace on first use, checks its label and keeps the
// connection. It is safe for concurrent use.
type Namespaces struct {
	store   *meta.Store
	cluster *meta.ClusterRecord
	opts    NamespaceOptions

	mu   sync.Mutex
	devs map[string]blockdev.Device // connected
	// pending are the stand-ins of namespaces not connected (yet): their
	// IO fails with the connection error, class blockdev.ErrUnavailable,
	// until Probe swaps the connected device in.
	pending map[string]*blockdev.Swappable
	closed  bool

	// published is the path state last recorded, by namespace and path;
	// only the watchPaths goroutine uses it.
	published map[string]map[string]string
	stopWatch context.CancelFunc
	watchDone chan struct{}
}

// NewNamespaces returns a DeviceSet for the namespaces of store's cluster.
func NewNamespaces(ctx context.Context, store *meta.Store, opts NamespaceOptions) (*Namespaces, error) {
	opts.ensureDefaults()
	c, err := store.Cluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster record: %w", err)
	}
	n := &Namespaces{store: store, cluster: c, opts: opts, devs: map[string]blockdev.Device{}, pending: map[string]*blockdev.Swappable{},
		published: map[string]map[string]string{}, stopWatch: func() {}, watchDone: make(chan struct{})}
	if opts.PathStateInterval > 0 {
		var wctx context.Context
		wctx, n.stopWatch = context.WithCancel(context.Background())
		go n.watchPaths(wctx, opts.PathStateInterval)
	} else {
		close(n.watchDone)
	}
	return n, nil
}

// Device returns the connected, label-checked device of namespace id,
// connecting it on first use with ctx (bounded by ConnectTimeout) and
// without holding n's lock, so that other namespaces resolve meanwhile. A
// namespace whose target cannot be reached is returned as a stand-in that
// fails every IO as unavailable (so the volume works degraded around it
// instead of failing) until Probe connects it.
func (n *Namespaces) Device(ctx context.Context, id string) (blockdev.Device, error) {
	if d := n.known(id); d != nil {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.ConnectTimeout+5*time.Second)
	defer cancel()
	d, err := n.open(ctx, id)
	if err == nil {
		return n.keep(id, d, nil)
	}
	err = fmt.Errorf("namespace %s: %w", id, err)
	if errors.Is(err, meta.ErrNoLabel) || errors.Is(err, meta.ErrLabelMismatch) {
		return n.badLabel(ctx, id, err)
	}
	if blockdev.Class(err) != blockdev.ErrUnavailable || ctx.Err() == context.Canceled {
		return nil, err // no such record, or fenced: never serve it
	}
	rec, rerr := n.store.Namespace(ctx, id)
	if rerr != nil {
		return nil, err
	}
	return n.keep(id, nil, blockdev.NewSwappable(rec.Size, meta.BlockSize, blockdev.NewFailing(rec.Size, meta.BlockSize, err)))
}

// badLabel keeps namespace id, which answers but does not carry its label
// (err: blank, another cluster's or namespace's, or other data), as a
// stand-in whose every IO fails as unavailable: none of the data there is
// the volume's, so its shards count as missing (reads reconstruct them)
// and nothing is ever written to it. It is logged and marked failed in
// etcd (unless out or failed already), so that `ns ls` and `admin status`
// show it and the controller rebuilds its shards elsewhere; an operator
// then replaces or removes it.
func (n *Namespaces) badLabel(ctx context.Context, id string, err error) (blockdev.Device, error) {
	rec, rerr := n.store.Namespace(ctx, id)
	if rerr != nil {
		return nil, err
	}
	n.opts.Logf("[ERR] %v: its shards are treated as missing and it is marked failed (its shards are rebuilt elsewhere)", err)
	if st := rec.State; st != placement.StateOut.String() && st != placement.StateFailed.String() {
		if ferr := n.store.SetNamespaceState(ctx, id, placement.StateFailed); ferr != nil {
			n.opts.Logf("[WARN] namespace %s: marking it failed: %v", id, ferr)
		}
	}
	fail := blockdev.NewFailing(rec.Size, meta.BlockSize, blockdev.Mark(err, blockdev.ErrUnavailable))
	return n.keep(id, nil, blockdev.NewSwappable(rec.Size, meta.BlockSize, fail))
}

// known returns the device or stand-in already kept for id, or nil.
func (n *Namespaces) known(id string) blockdev.Device {
	n.mu.Lock()
	defer n.mu.Unlock()
	if d, ok := n.devs[id]; ok {
		return d
	}
	if p, ok := n.pending[id]; ok {
		return p
	}
	return nil
}

// keep records the connected device d, or the stand-in p, of id, unless
// another caller kept one meanwhile: then that one is returned and d closed.
func (n *Namespaces) keep(id string, d blockdev.Device, p *blockdev.Swappable) (blockdev.Device, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cur, ok := n.devs[id]; ok {
		closeIf(d)
		return cur, nil
	}
	if cur, ok := n.pending[id]; ok {
		closeIf(d)
		return cur, nil
	}
	if n.closed {
		closeIf(d)
		return nil, fmt.Errorf("namespace %s: closed: %w", id, blockdev.ErrUnavailable)
	}
	if d != nil {
		n.devs[id] = d
		return d, nil
	}
	n.pending[id] = p
	return p, nil
}

func closeIf(d blockdev.Device) {
	if d != nil {
		d.Close()
	}
}

// Probe checks that namespace id answers and is still the namespace its
// label says: it connects a stand-in from Device (whose IO then goes to the
// real device) or reads the label of a connected one. A nil error means IO
// to it can be tried again.
func (n *Namespaces) Probe(ctx context.Context, id string) error {
	n.mu.Lock()
	d, connected := n.devs[id]
	p := n.pending[id]
	n.mu.Unlock()
	if connected {
		return CheckLabel(ctx, d, n.cluster.Label(id))
	}
	if p == nil {
		return fmt.Errorf("namespace %s: not in use: %w", id, blockdev.ErrInvalid)
	}
	d, err := n.open(ctx, id)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", id, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		d.Close()
		return fmt.Errorf("namespace %s: closed: %w", id, blockdev.ErrUnavailable)
	}
	if n.pending[id] != p { // another Probe connected it meanwhile: keep that one
		d.Close()
		return nil
	}
	p.Swap(d)
	n.devs[id] = d
	delete(n.pending, id)
	return nil
}

func (n *Namespaces) open(ctx context.Context, id string) (blockdev.Device, error) {
	rec, err := n.store.Namespace(ctx, id)
	if err != nil {
		return nil, err
	}
	dev, err := Connect(ctx, rec, n.opts)
	if err != nil {
		return nil, err
	}
	if err := CheckLabel(ctx, dev, n.cluster.Label(id)); err != nil {
		dev.Close()
		return nil, err
	}
	if n.opts.Session == nil {
		return dev, nil
	}
	if err := n.opts.Session.claim(ctx, rec, dev); err != nil {
		dev.Close()
		return nil, err
	}
	return &fenceWatch{Passthrough: blockdev.Passthrough{Device: dev}, s: n.opts.Session}, nil
}

// claim makes the session the volume's writer on namespace rec
// (initiator.Device.Claim). A namespace that cannot fence is used with a
// warning (placement keeps read-write slots off it unless the operator
// allowed it, meta.NamespaceRecord.AllowUnfenced). A newer session found
// there means this one is stale: Fenced is called.
func (s *Session) claim(ctx context.Context, rec *meta.NamespaceRecord, dev *initiator.Device) error {
	if !dev.CanReserve() {
		if s.Logf != nil {
			s.Logf("namespace %s cannot fence (no NVMe reservations): a stale owner's writes are not refused there", rec.ID)
		}
		return nil
	}
	err := dev.Claim(ctx, s.Epoch)
	if blockdev.Class(err) == blockdev.ErrFenced {
		s.Fenced(err)
	}
	if err != nil {
		return fmt.Errorf("claiming for epoch %d: %w", s.Epoch, err)
	}
	return nil
}

// fenceWatch is a claimed namespace: a write, flush, trim or zeroing the
// storage refuses as fenced ends the session (Session.Fenced) before the
// error goes up. Reads are never fenced (write-exclusive reservations).
type fenceWatch struct {
	blockdev.Passthrough
	s *Session
}

// Paths reports the wrapped initiator's paths (path state publishing, a
// capability Passthrough does not know of); none for other devices.
func (f *fenceWatch) Paths() []initiator.PathStats {
	if p, ok := f.Device.(pather); ok {
		return p.Paths()
	}
	return nil
}

func (f *fenceWatch) check(err error) error {
	if err != nil && blockdev.Class(err) == blockdev.ErrFenced {
		f.s.Fenced(err)
	}
	return err
}

func (f *fenceWatch) WriteAt(ctx context.Context, b []byte, off int64) error {
	return f.check(f.Device.WriteAt(ctx, b, off))
}

func (f *fenceWatch) WriteAtFUA(ctx context.Context, b []byte, off int64) error {
	return f.check(f.Passthrough.WriteAtFUA(ctx, b, off))
}

func (f *fenceWatch) Flush(ctx context.Context) error { return f.check(f.Device.Flush(ctx)) }

func (f *fenceWatch) Trim(ctx context.Context, off, n int64) error {
	return f.check(f.Device.Trim(ctx, off, n))
}

func (f *fenceWatch) WriteZeroes(ctx context.Context, off, n int64) error {
	return f.check(f.Device.WriteZeroes(ctx, off, n))
}

// Connect opens an NVMe/TCP initiator over every path of a namespace.
func Connect(ctx context.Context, rec *meta.NamespaceRecord, o NamespaceOptions) (*initiator.Device, error) {
	o.ensureDefaults()
	paths := make([]string, 0, len(rec.Paths))
	for _, p := range rec.Paths {
		paths = append(paths, strings.TrimPrefix(p.Addr, "tcp://"))
	}
	var hostID [16]byte
	if o.Session != nil {
		hostID = o.Session.HostID
	}
	return initiator.Open(ctx, initiator.Options{
		HostNQN: o.HostNQN, HostID: hostID, DHCHAPSecret: o.DHCHAPSecret, DHCHAPCtrlSecret: o.DHCHAPCtrlSecret,
		TLSKey: o.TLSKey, HostTraddr: o.HostTraddr, SubsysNQN: rec.NQN, NSID: rec.NSID, Paths: paths,
		IOQueues: o.IOQueues, ControllerLossTimeout: o.ControllerLossTimeout,
		ConnectTimeout: o.ConnectTimeout, Logf: o.Logf,
	})
}

// Close closes every connection.
func (n *Namespaces) Close() error {
	n.stopWatch()
	<-n.watchDone
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	var errs []error
	for id, d := range n.devs {
		errs = append(errs, d.Close())
		delete(n.devs, id)
	}
	return errors.Join(errs...)
}

// CheckLabel reads the label block of dev and compares it with want.
func CheckLabel(ctx context.Context, dev blockdev.Device, want meta.Label) error {
	b := make([]byte, meta.LabelSize)
	if err := dev.ReadAt(ctx, b, 0); err != nil {
		return fmt.Errorf("reading the label: %w", err)
	}
	return meta.CheckLabel(b, want)
}

// WriteLabel labels a namespace for the cluster. A namespace that already
// carries the same label is left alone; one with another label or with data
// in its label block is refused (never overwritten).
func WriteLabel(ctx context.Context, dev blockdev.Device, l meta.Label) error {
	err := CheckLabel(ctx, dev, l)
	if !errors.Is(err, meta.ErrNoLabel) {
		return err // nil (already labelled) or a mismatch
	}
	b, err := meta.EncodeLabel(l)
	if err != nil {
		return err
	}
	return blockdev.WriteFUA(ctx, dev, b, 0)
}

// HostTraddrUsage is the help of every --host-traddr flag.
const HostTraddrUsage = "local IP address the connections to targets leave from, as nvme-cli's --host-traddr (pin storage traffic to one NIC; default: by route)"
