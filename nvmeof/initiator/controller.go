package initiator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// adminDepth is the admin queue size (SQSIZE 31), as the Linux host uses.
const adminDepth = 32

// nsInfo is what Identify Namespace (and the descriptor list) told us.
type nsInfo struct {
	size     int64
	bs       int
	anaGroup uint32
	dlfeat   uint8
	nguid    [16]byte
	eui64    [8]byte
	uuid     [16]byte
}

// controller is one association with a target controller over one path:
// the admin queue and the I/O queues.
type controller struct {
	o      *Options
	addr   string
	admin  *queue
	ios    []*queue
	cntlid uint16
	id     pdu.IdentifyController
	ns     nsInfo
	inCap  int // largest in-capsule write
	maxXfr int // largest transfer per command, bytes

	ana      atomic.Uint32 // pdu.ANAState of our namespace on this path
	inflight atomic.Int32
	rr       atomic.Uint32
	anaKick  chan struct{}

	// pathIndex and onANA are set before the controller serves IO: the
	// path it belongs to and what to call when a path error changes its
	// ANA state.
	pathIndex int
	onANA     func()

	failed atomic.Bool
	dead   chan struct{}
	mu     sync.Mutex // guards err, and ios while the controller is brought up
	err    error
}

func newController(o *Options, addr string) *controller {
	return &controller{o: o, addr: addr, dead: make(chan struct{}), anaKick: make(chan struct{}, 1), onANA: func() {}}
}

// fail tears the association down: every queue is closed and every command
// in flight fails with a transport error. Safe to call many times, from
// any goroutine (queues call it when they die).
func (c *controller) fail(err error) {
	if !c.failed.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	c.err = err
	qs := c.queuesLocked()
	c.mu.Unlock()
	close(c.dead)
	for _, q := range qs {
		q.fail(err)
	}
}

// deathErr returns why the controller failed.
func (c *controller) deathErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// alive reports whether the controller has not failed.
func (c *controller) alive() bool { return !c.failed.Load() }

// anaState returns the ANA state of our namespace on this controller.
func (c *controller) anaState() pdu.ANAState { return pdu.ANAState(c.ana.Load()) }

// adopt ties a started queue's death to the controller's.
func (c *controller) adopt(q *queue) {
	q.onDead = func(err error) { c.fail(err) }
}

// connectController brings up a controller on addr: admin queue, Connect,
// enable, Identify, and (for I/O controllers) the namespace, queue count,
// ANA state and I/O queues. ctx bounds the whole bring-up.
func connectController(ctx context.Context, o *Options, addr, nqn string, discovery bool) (*controller, error) {
	c := newController(o, addr)
	admin, err := dialQueue(ctx, o, addr, 0, adminDepth)
	if err != nil {
		return nil, err
	}
	c.admin = admin
	c.adopt(admin)
	admin.start()
	stop := context.AfterFunc(ctx, func() { c.fail(fmt.Errorf("connect: %w", context.Cause(ctx))) })
	defer stop()
	if err := c.bringUp(ctx, nqn, discovery); err != nil {
		c.fail(err)
		c.wait()
		var ce *ConnectError
		if errors.As(err, &ce) { // it names the address itself
			return nil, blockdev.Mark(fmt.Errorf("nvme/tcp: %w", err), blockdev.ErrUnavailable)
		}
		return nil, blockdev.Mark(fmt.Errorf("nvme/tcp %s: %w", addr, err), blockdev.ErrUnavailable)
	}
	return c, nil
}

func (c *controller) bringUp(ctx context.Context, nqn string, discovery bool) error {
	kato := uint32(c.o.KATO / time.Millisecond)
	if err := c.fabricsConnect(ctx, c.admin, 0, adminDepth, pdu.CNTLIDDynamic, nqn, kato); err != nil {
		return err
	}
	capv, err := c.propGet(ctx, pdu.PropCAP, true)
	if err != nil {
		return err
	}
	if err := c.enable(ctx, capv); err != nil {
		return err
	}
	if err := c.identifyController(ctx, discovery); err != nil {
		return err
	}
	if discovery {
		return nil
	}
	if err := c.identifyNamespace(ctx); err != nil {
		return err
	}
	return c.setupIO(ctx, capv)
}

// fabricsConnect sends a Connect on q and records the controller ID.
func (c *controller) fabricsConnect(ctx context.Context, q *queue, qid uint16, depth int, cntlid uint16, nqn string, kato uint32) error {
	cmd := pdu.ConnectCmd{QID: qid, SQSize: uint16(depth - 1), KATO: kato}
	if c.o.DisableSQFlow {
		cmd.CAttr = pdu.CAttrDisableSQFlow
	}
	data := &pdu.ConnectData{HostID: c.o.HostID, CNTLID: cntlid, SubNQN: nqn, HostNQN: c.o.HostNQN}
	r := &request{op: fmt.Sprintf("connect qid %d", qid), sqe: cmd.SQE(0), data: data.Marshal(), dir: dirH2C, inCapsule: true}
	cqe, err := q.do(ctx, r)
	if err != nil {
		return connectErr(err, c.addr, nqn, c.o.HostNQN, qid, cqe.DW0)
	}
	if cqe.DW0&pdu.ConnectAuthReq != 0 {
		if err := c.authenticate(ctx, q, qid, nqn); err != nil {
			return err
		}
	}
	if qid == 0 {
		c.cntlid = uint16(cqe.DW0)
	}
	return nil
}

func (c *controller) propGet(ctx context.Context, off uint32, size8 bool) (uint64, error) {
	r := &request{op: "property get", sqe: pdu.PropertyCmd{Size8: size8, Offset: off}.GetSQE(0)}
	cqe, err := c.admin.do(ctx, r)
	return uint64(cqe.DW0) | uint64(cqe.DW1)<<32, err
}

func (c *controller) propSet(ctx context.Context, off uint32, v uint32) error {
	r := &request{op: "property set", sqe: pdu.PropertyCmd{Offset: off, Value: uint64(v)}.SetSQE(0)}
	_, err := c.admin.do(ctx, r)
	return err
}

// enable sets CC.EN and waits for CSTS.RDY, for at most CAP.TO.
func (c *controller) enable(ctx context.Context, capv uint64) error {
	if err := c.propSet(ctx, pdu.PropCC, pdu.HostCC(0, true)); err != nil {
		return err
	}
	timeout := time.Duration(max(uint8(capv>>24), 1)) * 500 * time.Millisecond
	deadline := time.Now().Add(timeout)
	waits := retry.NewBackoff(retry.Options{Initial: time.Millisecond, Max: 100 * time.Millisecond})
	for {
		csts, err := c.propGet(ctx, pdu.PropCSTS, false)
		if err != nil {
			return err
		}
		switch {
		case uint32(csts)&pdu.CSTSFatal != 0:
			return errors.New("controller fatal status (CSTS.CFS) while enabling")
		case uint32(csts)&pdu.CSTSReady != 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("controller not ready after %v", timeout)
		}
		if err := retry.Sleep(ctx, waits.Next()); err != nil {
			return err
		}
	}
}

// identify reads 4096 bytes of Identify data for cns/nsid.
func (c *controller) identify(ctx context.Context, cns uint8, nsid uint32) ([]byte, error) {
	buf := make([]byte, pdu.IdentifyDataLen)
	r := &request{op: fmt.Sprintf("identify cns %d", cns), sqe: pdu.IdentifySQE(0, cns, nsid), data: buf, dir: dirC2H}
	_, err := c.admin.do(ctx, r)
	return buf, err
}

func (c *controller) identifyController(ctx context.Context, discovery bool) error {
	b, err := c.identify(ctx, pdu.CNSController, 0)
	if err != nil {
		return err
	}
	if c.id, err = pdu.ParseIdentifyController(b); err != nil {
		return err
	}
	switch {
	case c.id.CNTLID != c.cntlid:
		return fmt.Errorf("identify CNTLID %d differs from the Connect result %d", c.id.CNTLID, c.cntlid)
	case discovery:
		return nil
	case c.id.ICDOFF != 0:
		return fmt.Errorf("identify ICDOFF %d unsupported", c.id.ICDOFF)
	case c.id.SGLS&3 == 0:
		return errors.New("controller does not support SGLs")
	}
	c.inCap = c.id.InCapsuleMax()
	if c.o.MaxInCapsule > 0 {
		c.inCap = min(c.inCap, c.o.MaxInCapsule)
	} else if c.o.MaxInCapsule < 0 {
		c.inCap = 0
	}
	return nil
}

func (c *controller) identifyNamespace(ctx context.Context) error {
	b, err := c.identify(ctx, pdu.CNSNamespace, c.o.NSID)
	if err != nil {
		return err
	}
	n, err := pdu.ParseIdentifyNamespace(b)
	if err != nil {
		return err
	}
	bs := n.BlockSize()
	switch {
	case n.NCAP == 0 || n.NSZE == 0:
		return fmt.Errorf("namespace %d is not present", c.o.NSID)
	case bs < 512 || bs > 4096:
		return fmt.Errorf("namespace %d: unsupported block size %d", c.o.NSID, bs)
	case n.NSZE > uint64(1<<62)/uint64(bs):
		return fmt.Errorf("namespace %d: size %d blocks too large", c.o.NSID, n.NSZE)
	}
	c.ns = nsInfo{size: int64(n.NSZE) * int64(bs), bs: bs, anaGroup: n.ANAGRPID, dlfeat: n.DLFEAT,
		nguid: n.NGUID, eui64: n.EUI64}
	c.maxXfr = 65536 * bs
	if c.id.MDTS != 0 && c.id.MDTS < 20 {
		c.maxXfr = min(c.maxXfr, 4096<<c.id.MDTS)
	}
	c.maxXfr = min(c.maxXfr, 32<<20)
	if b, err := c.identify(ctx, pdu.CNSNSDescList, c.o.NSID); err == nil {
		ds, _ := pdu.ParseNSDescList(b)
		for _, d := range ds {
			if d.Type == pdu.NIDTUUID && len(d.ID) == 16 {
				copy(c.ns.uuid[:], d.ID)
			}
		}
	}
	return nil
}

// setupIO negotiates the queue count, reads the ANA state, asks for
// asynchronous events and connects the I/O queues.
func (c *controller) setupIO(ctx context.Context, capv uint64) error {
	want := uint16(c.o.IOQueues)
	r := &request{op: "set features number of queues", sqe: pdu.FeaturesSQE(0, true, pdu.FeatNumQueues, pdu.NumQueues(want, want))}
	cqe, err := c.admin.do(ctx, r)
	if err != nil {
		return err
	}
	nsq, ncq := pdu.ParseNumQueues(cqe.DW0)
	n := min(int(want), int(nsq), int(ncq))
	depth := min(c.o.QueueDepth, int(pdu.CAPMQES(capv))+1)
	if c.id.MAXCMD != 0 {
		depth = min(depth, int(c.id.MAXCMD))
	}
	c.ana.Store(uint32(pdu.ANAOptimized))
	if c.id.CMIC&pdu.CMICANA != 0 {
		if err := c.refreshANA(ctx); err != nil {
			return err
		}
	}
	if aec := c.id.OAES & (pdu.OAESANA | pdu.OAESNSAttr); aec != 0 {
		r := &request{op: "set features async event config", sqe: pdu.FeaturesSQE(0, true, pdu.FeatAsyncEvent, aec)}
		if _, err := c.admin.do(ctx, r); err != nil {
			c.o.Logf("nvme/tcp %s: async event configuration refused: %v", c.addr, err)
		}
	}
	for i := 1; i <= n; i++ {
		q, err := dialQueue(ctx, c.o, c.addr, uint16(i), depth)
		if err != nil {
			return err
		}
		c.adopt(q)
		q.start()
		c.mu.Lock()
		c.ios = append(c.ios, q)
		c.mu.Unlock()
		if !c.alive() {
			q.fail(c.deathErr())
		}
		if err := c.fabricsConnect(ctx, q, uint16(i), depth, c.cntlid, c.o.SubsysNQN, 0); err != nil {
			return err
		}
	}
	return nil
}

// refreshANA reads the ANA log page and stores the state of our
// namespace's group. A group missing from the log reads as "change"
// (transitioning): unusable until a later read finds it.
func (c *controller) refreshANA(ctx context.Context) error {
	n := 16 + int(max(c.id.NANAGRPID, 1))*pdu.ANAGroupHdrLen + int(c.id.MNAN)*4
	n = min((n+3)&^3, 1<<20)
	buf := make([]byte, n)
	g := pdu.GetLogPageCmd{LID: pdu.LogANA, NumD: uint32(n / 4)}
	r := &request{op: "get log page ana", sqe: g.SQE(0, 0xFFFFFFFF), data: buf, dir: dirC2H}
	if _, err := c.admin.do(ctx, r); err != nil {
		return err
	}
	l, err := pdu.ParseANALog(buf, c.id.ANAGRPMAX)
	if err != nil {
		return err
	}
	st := anaStateOf(l, c.o.NSID, c.ns.anaGroup)
	if old := pdu.ANAState(c.ana.Swap(uint32(st))); old != st {
		c.o.Logf("nvme/tcp %s: ANA state %v -> %v", c.addr, old, st)
	}
	return nil
}

func anaStateOf(l pdu.ANALog, nsid, group uint32) pdu.ANAState {
	for _, g := range l.Groups {
		for _, id := range g.NSIDs {
			if id == nsid {
				return g.State
			}
		}
	}
	for _, g := range l.Groups {
		if g.GroupID == group && group != 0 {
			return g.State
		}
	}
	return pdu.ANAChange
}

// timedAdmin runs an admin command and fails the whole controller when it
// takes longer than limit: a hung admin queue means a dead association.
func (c *controller) timedAdmin(r *request, limit time.Duration) (pdu.CQE, error) {
	t := time.AfterFunc(limit, func() { c.fail(fmt.Errorf("%s timed out after %v", r.op, limit)) })
	defer t.Stop()
	return c.admin.do(context.Background(), r)
}

// pickQueue returns the I/O queue with the fewest commands in flight,
// scanning from a rotating start so ties spread.
func (c *controller) pickQueue() *queue {
	n := len(c.ios)
	start := int(c.rr.Add(1)) % n
	best := c.ios[start]
	bestN := best.inflight.Load()
	for i := 1; i < n && bestN > 0; i++ {
		q := c.ios[(start+i)%n]
		if v := q.inflight.Load(); v < bestN {
			best, bestN = q, v
		}
	}
	return best
}

// queuesLocked returns every queue of the controller. REQUIRES: c.mu.
func (c *controller) queuesLocked() []*queue {
	return append([]*queue{c.admin}, c.ios...)
}

// wait blocks until no goroutine reads any queue of the controller.
func (c *controller) wait() {
	c.mu.Lock()
	qs := c.queuesLocked()
	c.mu.Unlock()
	for _, q := range qs {
		q.quiesce()
	}
}

// shutdown asks the controller for a normal shutdown (CC.SHN), briefly,
// then closes every queue.
func (c *controller) shutdown(limit time.Duration) {
	if c.alive() {
		r := &request{op: "property set cc.shn", sqe: pdu.PropertyCmd{Offset: pdu.PropCC,
			Value: uint64(pdu.HostCC(0, true) | pdu.CCShnNormal)}.SetSQE(0)}
		_, _ = c.timedAdmin(r, limit)
	}
	c.fail(errors.New("closed"))
	c.wait()
}

func sleepCtx(ctx context.Context, d time.Duration) error { return retry.Sleep(ctx, d) }
