package target

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/accept"
	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// ErrClosed is returned by calls on a closed target.
var ErrClosed = errors.New("target closed")

// Target is a userspace NVMe/TCP target. Create it with New, start it with
// Start, stop it with Close. All methods are safe for concurrent use.
type Target struct {
	cfg    Config
	subs   map[string]*subsystem
	groups []uint32
	pool   bufPool
	logf   func(string, ...any)

	conflicts atomic.Uint64 // I/O commands refused by a reservation
	refusedBy accept.Counts // connections refused, by reason (stats.go)
	queues    atomic.Int64  // connections that completed a Connect and are open
	hosts     hostSlots     // queues per claimed host NQN
	refused   refusals      // Connect refusals logged

	mu        sync.Mutex
	listeners []*listener
	anaChg    uint64 // global ANA change count
	ctrls     map[uint16]*controller
	nextID    uint16
	discGen   uint64
	fault     faultState
	started   bool
	closed    bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// wrapListener, when set (by tests), wraps every listener bound.
	wrapListener func(net.Listener) net.Listener
}

type subsystem struct {
	cfg     *SubsystemConfig
	ns      map[uint32]*namespace
	nsids   []uint32 // ascending
	allowed map[string]bool
	keys    map[string]auth.Keys // DH-HMAC-CHAP, by host NQN

	// live holds every controller that may still run commands: from its
	// admin Connect until its last connection has finished, which can be
	// after the association ended (keep-alive expiry, dropped admin
	// queue). Preempt-and-abort drains through it.
	mu   sync.Mutex
	live map[*controller]struct{}
}

func (s *subsystem) track(ct *controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[ct] = struct{}{}
}

func (s *subsystem) forget(ct *controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, ct)
}

type namespace struct {
	cfg  NamespaceConfig
	dev  blockdev.Device
	bs   int
	nlb  uint64
	resv reservations

	counters nsCounters
	times    ioTimes  // counts and latency by op
	hosts    hostIO   // the same per host NQN
	sched    *ioSched // shares the device between controllers
}

// New validates cfg (after filling defaults on a copy) and builds a target.
// Nothing listens until Start.
func New(cfg Config) (*Target, error) {
	cfg.Subsystems = append([]SubsystemConfig(nil), cfg.Subsystems...)
	cfg.HostWeights = maps.Clone(cfg.HostWeights)
	for i := range cfg.Subsystems {
		cfg.Subsystems[i].Namespaces = append([]NamespaceConfig(nil), cfg.Subsystems[i].Namespaces...)
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("target config: %w", err)
	}
	t := &Target{cfg: cfg, subs: map[string]*subsystem{}, ctrls: map[uint16]*controller{}, nextID: 1, discGen: 1,
		refusedBy: accept.NewCounts(RefusalReasons())}
	t.logf = cfg.Logf
	if t.logf == nil {
		t.logf = func(string, ...any) {}
	}
	t.groups = cfg.groups()
	for i := range t.cfg.Subsystems {
		s, err := newSubsystem(&t.cfg.Subsystems[i], &cfg)
		if err != nil {
			return nil, err
		}
		t.subs[s.cfg.NQN] = s
	}
	for i, lc := range cfg.Listeners {
		l := &listener{idx: i, addr: lc.Address, conns: map[*conn]struct{}{}, ana: map[uint32]anaEntry{},
			pending: accept.NewPending(cfg.MaxPendingConnections, cfg.MaxPendingPerIP)}
		for _, g := range t.groups {
			st, ok := lc.ANA[g]
			if !ok {
				st = pdu.ANAOptimized
			}
			l.ana[g] = anaEntry{state: st}
		}
		t.listeners = append(t.listeners, l)
	}
	return t, nil
}

func newSubsystem(c *SubsystemConfig, tc *Config) (*subsystem, error) {
	s := &subsystem{cfg: c, ns: map[uint32]*namespace{}, allowed: map[string]bool{}, live: map[*controller]struct{}{}}
	for _, h := range c.AllowedHosts {
		s.allowed[h] = true
	}
	s.keys = map[string]auth.Keys{}
	for _, k := range c.HostKeys {
		ks, err := k.keys()
		if err != nil {
			return nil, fmt.Errorf("subsystem %s: %w", c.NQN, err)
		}
		s.keys[k.HostNQN] = ks
	}
	for _, nc := range c.Namespaces {
		bs := nc.Device.BlockSize()
		if bs < 512 || bs > 4096 || bs&(bs-1) != 0 || nc.Device.Size()%int64(bs) != 0 || nc.Device.Size() == 0 {
			return nil, fmt.Errorf("subsystem %s nsid %d: block size %d / size %d unusable: %w",
				c.NQN, nc.NSID, bs, nc.Device.Size(), blockdev.ErrInvalid)
		}
		ns := &namespace{cfg: nc, dev: nc.Device, bs: bs, nlb: uint64(nc.Device.Size() / int64(bs))}
		ns.sched = newIOSched(ns, tc.DeviceQueueDepth, tc.HostWeights)
		if err := ns.loadReservations(); err != nil {
			return nil, fmt.Errorf("subsystem %s nsid %d: %w", c.NQN, nc.NSID, err)
		}
		s.ns[nc.NSID] = ns
		s.nsids = append(s.nsids, nc.NSID)
	}
	sort.Slice(s.nsids, func(i, j int) bool { return s.nsids[i] < s.nsids[j] })
	return s, nil
}

// loadReservations reads the persisted reservation state, if any.
func (ns *namespace) loadReservations() error {
	if ns.cfg.ReservationFile == "" {
		return nil
	}
	ns.resv.store = &resvStore{path: ns.cfg.ReservationFile}
	st, err := ns.resv.store.load()
	if err != nil {
		return err
	}
	ns.resv.store.reserve()
	ns.resv.state.Store(st.seal())
	return nil
}

func (s *subsystem) hostAllowed(nqn string) bool {
	_, keyed := s.keys[nqn]
	return s.cfg.AllowAnyHost || s.allowed[nqn] || keyed
}

// Start binds every listener and starts serving. ctx bounds the target's
// life: when it is done the target closes as if Close were called.
func (t *Target) Start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if t.started {
		return errors.New("target already started")
	}
	t.ctx, t.cancel = context.WithCancel(ctx)
	for _, l := range t.listeners {
		if err := t.listenLocked(l, l.addr); err != nil {
			t.cancel()
			for _, l := range t.listeners {
				if l.ln != nil {
					l.ln.Close()
				}
			}
			return err
		}
	}
	t.started = true
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		<-t.ctx.Done()
		t.shutdown()
	}()
	return nil
}

// listenLocked binds l at addr and starts its accept loop. REQUIRES: t.mu.
func (t *Target) listenLocked(l *listener, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(t.ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listener %d (%s): %w", l.idx, addr, err)
	}
	if t.wrapListener != nil {
		ln = t.wrapListener(ln)
	}
	l.ln = ln
	l.bound = ln.Addr().String()
	t.wg.Add(1)
	go t.acceptLoop(l, ln)
	return nil
}

// acceptLoop serves the connections of listener l until ln is closed
// (accept.Serve: it waits out temporary errors and caps the connections).
func (t *Target) acceptLoop(l *listener, ln net.Listener) {
	defer t.wg.Done()
	o := accept.Options{MaxConns: max(t.cfg.MaxConnections, 0), MaxConnsPerIP: max(t.cfg.MaxConnectionsPerIP, 0),
		Name: fmt.Sprintf("nvmeof/target: listener %d (%s)", l.idx, l.bound), Logf: t.logf,
		Refused: t.refuse}
	err := accept.Serve(t.ctx, ln, o, func(nc net.Conn) {
		if !t.admitPending(l, nc) {
			return
		}
		sc, ok := t.secure(l, nc)
		if !ok {
			return
		}
		c := t.newConn(l, sc)
		c.raw = nc
		t.mu.Lock()
		if t.closed || l.ln != ln {
			t.mu.Unlock()
			l.pending.Done(nc)
			nc.Close()
			return
		}
		l.conns[c] = struct{}{}
		t.mu.Unlock()
		c.serve()
	})
	if err != nil {
		t.logf("nvmeof/target: listener %d (%s) stopped accepting: %v", l.idx, l.bound, err)
	}
}

// Close stops every listener, closes every connection and waits for all
// goroutines. It does not close the namespaces' devices.
func (t *Target) Close() error {
	t.mu.Lock()
	started := t.started
	t.mu.Unlock()
	if !started {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		return nil
	}
	t.cancel()
	t.wg.Wait()
	return nil
}

func (t *Target) shutdown() {
	t.mu.Lock()
	t.closed = true
	var conns []*conn
	for _, l := range t.listeners {
		if l.ln != nil {
			l.ln.Close()
			l.ln = nil
		}
		l.thawLocked()
		for c := range l.conns {
			conns = append(conns, c)
		}
	}
	ctrls := make([]*controller, 0, len(t.ctrls))
	for _, c := range t.ctrls {
		ctrls = append(ctrls, c)
	}
	t.mu.Unlock()
	for _, c := range ctrls {
		c.stopTimer()
	}
	for _, c := range conns {
		c.close()
	}
}

// Addr returns the bound address of listener i ("127.0.0.1:PORT"), or ""
// when i is out of range or the target has not started.
func (t *Target) Addr(i int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i < 0 || i >= len(t.listeners) {
		return ""
	}
	return t.listeners[i].bound
}

// Addrs returns the bound addresses of every listener.
func (t *Target) Addrs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, len(t.listeners))
	for i, l := range t.listeners {
		out[i] = l.bound
	}
	return out
}

// ListenerIndex finds a listener by its configured or bound address.
func (t *Target) ListenerIndex(addr string) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, l := range t.listeners {
		if l.addr == addr || l.bound == addr {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no listener %q", addr)
}

// SetANAState sets the state of ANA group on listener (its index) and
// sends an ANA-change asynchronous event to every controller connected
// through that listener.
func (t *Target) SetANAState(listener int, group uint32, st pdu.ANAState) error {
	if !st.Valid() {
		return fmt.Errorf("ana state 0x%x invalid: %w", uint8(st), blockdev.ErrInvalid)
	}
	t.mu.Lock()
	if listener < 0 || listener >= len(t.listeners) {
		t.mu.Unlock()
		return fmt.Errorf("listener %d does not exist: %w", listener, blockdev.ErrInvalid)
	}
	l := t.listeners[listener]
	e, ok := l.ana[group]
	if !ok {
		t.mu.Unlock()
		return fmt.Errorf("ana group %d does not exist: %w", group, blockdev.ErrInvalid)
	}
	t.anaChg++
	l.ana[group] = anaEntry{state: st, chg: t.anaChg}
	_ = e
	var ctrls []*controller
	for _, c := range t.ctrls {
		if c.lst == listener && !c.disc {
			ctrls = append(ctrls, c)
		}
	}
	t.mu.Unlock()
	t.logf("nvmeof/target: listener %d ana group %d -> %v", listener, group, st)
	for _, c := range ctrls {
		c.raise(pdu.AEREvent{Type: pdu.AETypeNotice, Info: pdu.AENoticeANAChange, LogPage: pdu.LogANA}, pdu.OAESANA)
	}
	return nil
}

// ANAState returns the state of group on listener.
func (t *Target) ANAState(listener int, group uint32) (pdu.ANAState, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if listener < 0 || listener >= len(t.listeners) {
		return 0, fmt.Errorf("listener %d does not exist: %w", listener, blockdev.ErrInvalid)
	}
	e, ok := t.listeners[listener].ana[group]
	if !ok {
		return 0, fmt.Errorf("ana group %d does not exist: %w", group, blockdev.ErrInvalid)
	}
	return e.state, nil
}

func (t *Target) anaState(listener int, group uint32) pdu.ANAState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.listeners[listener].ana[group].state
}

// anaLog builds the ANA log of subsystem s as seen through listener li.
func (t *Target) anaLog(s *subsystem, li int) *pdu.ANALog {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.listeners[li]
	log := &pdu.ANALog{ChangeCount: t.anaChg}
	for _, g := range t.groups {
		d := pdu.ANAGroupDesc{GroupID: g, ChangeCount: l.ana[g].chg, State: l.ana[g].state}
		for _, id := range s.nsids {
			if s.ns[id].cfg.ANAGroup == g {
				d.NSIDs = append(d.NSIDs, id)
			}
		}
		log.Groups = append(log.Groups, d)
	}
	return log
}

// discoveryLog lists every subsystem hostNQN may reach on every listener.
// local is the address the host connected to, used for wildcard listeners.
func (t *Target) discoveryLog(hostNQN string, local net.Addr) []byte {
	nqns := make([]string, 0, len(t.subs))
	for n, s := range t.subs {
		if s.hostAllowed(hostNQN) {
			nqns = append(nqns, n)
		}
	}
	sort.Strings(nqns)
	t.mu.Lock()
	defer t.mu.Unlock()
	log := pdu.DiscoveryLog{GenCtr: t.discGen}
	for _, n := range nqns {
		for _, l := range t.listeners {
			if l.bound == "" {
				continue
			}
			log.Entries = append(log.Entries, t.cfg.TLS.discEntry(discEntry(n, l, local)))
		}
	}
	return log.Marshal()
}

func discEntry(nqn string, l *listener, local net.Addr) pdu.DiscoveryEntry {
	host, port, _ := net.SplitHostPort(l.bound)
	ip := net.ParseIP(host)
	if ip != nil && ip.IsUnspecified() {
		if ta, ok := local.(*net.TCPAddr); ok {
			ip = ta.IP
		}
	}
	fam := uint8(pdu.AdrFamIPv4)
	if ip != nil && ip.To4() == nil {
		fam = pdu.AdrFamIPv6
	}
	addr := host
	if ip != nil {
		addr = ip.String()
	}
	return pdu.DiscoveryEntry{
		TrType: pdu.TrTypeTCP, AdrFam: fam, SubType: pdu.SubTypeNVMe,
		TReq: pdu.TReqNotRequired | pdu.TReqDisableSQFlow, PortID: uint16(l.idx + 1),
		CNTLID: pdu.CNTLIDDynamic, ASQSZ: adminQueueSize, TrSvcID: port, SubNQN: nqn, TrAddr: addr,
	}
}

// allocCtrl registers a new controller with a unique ID. REQUIRES: t.mu.
func (t *Target) allocCtrlLocked(c *controller) bool {
	for i := 0; i < 0xFFEF; i++ {
		id := t.nextID
		t.nextID++
		if t.nextID > 0xFFEF {
			t.nextID = 1
		}
		if _, used := t.ctrls[id]; !used {
			c.id = id
			t.ctrls[id] = c
			return true
		}
	}
	return false
}

func (t *Target) removeCtrl(c *controller) {
	t.mu.Lock()
	if t.ctrls[c.id] == c {
		delete(t.ctrls, c.id)
	}
	t.mu.Unlock()
}

func (t *Target) ctrl(id uint16) *controller {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ctrls[id]
}

func (t *Target) removeConn(c *conn) {
	t.mu.Lock()
	delete(c.l.conns, c)
	t.mu.Unlock()
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error { return retry.Sleep(ctx, d) }

// NamespaceChanged reports that namespace nsid of subsystem nqn changed
// (for example its size or state): every controller of that subsystem gets
// a Namespace Attribute Changed event and the NSID in its Changed
// Namespace List log.
func (t *Target) NamespaceChanged(nqn string, nsid uint32) error {
	s := t.subs[nqn]
	if s == nil {
		return fmt.Errorf("no subsystem %q: %w", nqn, blockdev.ErrInvalid)
	}
	t.mu.Lock()
	var ctrls []*controller
	for _, c := range t.ctrls {
		if c.sub == s {
			ctrls = append(ctrls, c)
		}
	}
	t.mu.Unlock()
	for _, c := range ctrls {
		c.nsChanged(nsid)
	}
	return nil
}
