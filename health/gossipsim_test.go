package health

// The gossip simulation: hundreds of memberlist members in one process,
// each with the configuration Start gives a daemon (profileConfig(ProfileLAN),
// a key and a cluster label), wired by an in-memory transport that counts
// what every member sends. It runs inside a testing/synctest bubble: the
// clock is virtual and moves only when every goroutine waits, so the figures
// are memberlist's own protocol times at the shipped settings, unscaled, and
// do not depend on how busy the machine is (a busy machine only makes the
// run take longer). docs/scale.md ("Failure detection") explains the table.
//
// `make test` runs TestGossipSimSmoke (20 members: the killed one is seen
// dead by everyone, no one else is). `make gossip-sim` runs
// TestGossipSimTable at the sizes in -gossipsim.sizes and prints the table.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"
)

var simSizes = flag.String("gossipsim.sizes", "",
	"comma-separated pool sizes for TestGossipSimTable (make gossip-sim: 100,250,500); empty skips it")

// simLatency is the one-way delay of every packet and stream write in the
// simulation: a LAN round trip of 0.2ms.
const simLatency = 100 * time.Microsecond

// simNet is the in-memory network: one simTransport per member address.
type simNet struct {
	mu     sync.Mutex
	byAddr map[string]*simTransport
}

// simTransport is one member's memberlist.Transport. Packets are delivered
// after simLatency into a buffered channel and dropped when it is full, as
// UDP would drop them; streams are net.Pipe pairs. A silent transport (its
// host died) sends nothing, receives nothing, and dials to or from it wait
// out their timeout and fail.
type simTransport struct {
	net      *simNet
	addr     string // IP:port
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	silent   atomic.Bool

	sentBytes   atomic.Int64 // packets and stream writes
	sentPackets atomic.Int64 // packets only
	streams     atomic.Int64 // streams dialled
	dropped     atomic.Int64 // packets lost to a full receive queue
}

var _ memberlist.Transport = (*simTransport)(nil)

func (n *simNet) newTransport(i int) *simTransport {
	t := &simTransport{
		net:      n,
		addr:     fmt.Sprintf("10.%d.%d.%d:7946", i/65536, i/256%256, i%256),
		packetCh: make(chan *memberlist.Packet, 4096),
		streamCh: make(chan net.Conn, 64),
	}
	n.mu.Lock()
	n.byAddr[t.addr] = t
	n.mu.Unlock()
	return t
}

func (n *simNet) peer(addr string) (*simTransport, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.byAddr[addr]
	if !ok {
		return nil, fmt.Errorf("sim: no host at %s", addr)
	}
	return p, nil
}

func (t *simTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	host, port, err := net.SplitHostPort(t.addr)
	if err != nil {
		return nil, 0, err
	}
	p, err := strconv.Atoi(port)
	return net.ParseIP(host), p, err
}

func (t *simTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	if t.silent.Load() {
		return now, nil
	}
	dest, err := t.net.peer(addr)
	if err != nil {
		return now, err
	}
	t.sentBytes.Add(int64(len(b)))
	t.sentPackets.Add(1)
	p := &memberlist.Packet{Buf: slices.Clone(b), From: simAddr(t.addr)}
	time.AfterFunc(simLatency, func() {
		if dest.silent.Load() {
			return
		}
		p.Timestamp = time.Now()
		select {
		case dest.packetCh <- p:
		default:
			dest.dropped.Add(1)
		}
	})
	return now, nil
}

func (t *simTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	dest, err := t.net.peer(addr)
	if err != nil {
		return nil, err
	}
	if t.silent.Load() || dest.silent.Load() {
		time.Sleep(timeout)
		return nil, fmt.Errorf("sim: dial %s: timed out", addr)
	}
	t.streams.Add(1)
	local, remote := net.Pipe()
	select {
	case dest.streamCh <- &countingConn{Conn: remote, sent: &dest.sentBytes}:
	default:
		local.Close()
		remote.Close()
		return nil, fmt.Errorf("sim: dial %s: refused", addr)
	}
	return &countingConn{Conn: local, sent: &t.sentBytes}, nil
}

func (t *simTransport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }
func (t *simTransport) StreamCh() <-chan net.Conn           { return t.streamCh }
func (t *simTransport) Shutdown() error                     { return nil }

// countingConn counts the bytes its side writes.
type countingConn struct {
	net.Conn
	sent *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(int64(n))
	return n, err
}

// simAddr is a net.Addr for a packet's sender.
type simAddr string

func (a simAddr) Network() string { return "udp" }
func (a simAddr) String() string  { return string(a) }

// simPool is n members started in one bubble.
type simPool struct {
	tr      []*simTransport
	ml      []*memberlist.Memberlist
	mu      sync.Mutex
	victim  string
	seenAt  map[string]time.Time // observer -> when it saw victim dead
	backAt  map[string]time.Time // observer -> when it saw victim alive again
	revived bool                 // the victim speaks again
	falseDe int                  // deaths of members that were not killed
}

// startSimPool starts n members configured as Start configures a daemon
// and joins each to the first.
func startSimPool(t *testing.T, n int) *simPool {
	t.Helper()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	sn := &simNet{byAddr: map[string]*simTransport{}}
	p := &simPool{seenAt: map[string]time.Time{}, backAt: map[string]time.Time{}}
	for i := range n {
		name := fmt.Sprintf("host-%04d", i)
		meta := Meta{Role: RoleTarget, Host: name, Labels: map[string]string{"rack": fmt.Sprintf("r%02d", i%40)}}
		for j := range 16 {
			meta.Namespaces = append(meta.Namespaces, fmt.Sprintf("%s-n%02d", name, j))
		}
		tr := sn.newTransport(i)
		del := &delegate{meta: meta, members: map[string]Member{}, onEvent: p.observer(name)}
		mc := profileConfig(ProfileLAN)
		mc.Name, mc.Transport = name, tr
		mc.Delegate, mc.Events = del, del
		mc.SecretKey, mc.Label = key, "nvstripe/sim"
		mc.Logger = log.New(io.Discard, "", 0)
		ml, err := memberlist.Create(mc)
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		p.tr, p.ml = append(p.tr, tr), append(p.ml, ml)
		if i > 0 {
			if _, err := ml.Join([]string{p.tr[0].addr}); err != nil {
				t.Fatalf("member %d: join: %v", i, err)
			}
		}
	}
	return p
}

// observer returns the OnEvent of member name: it records when that member
// first sees the victim dead (and alive again once revived) and counts
// deaths of anyone else.
func (p *simPool) observer(name string) func(Member) {
	return func(m Member) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if m.Status != StatusDead {
			if _, ok := p.backAt[name]; !ok && p.revived && m.Name == p.victim {
				p.backAt[name] = time.Now()
			}
			return
		}
		if m.Name != p.victim {
			p.falseDe++
			return
		}
		if _, ok := p.seenAt[name]; !ok {
			p.seenAt[name] = time.Now()
		}
	}
}

// converge waits (virtual time) until every member sees all n, or limit.
func (p *simPool) converge(limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < limit {
		all := true
		for _, ml := range p.ml {
			if ml.NumMembers() != len(p.ml) {
				all = false
				break
			}
		}
		if all {
			return time.Since(start), nil
		}
		time.Sleep(time.Second)
	}
	return 0, fmt.Errorf("pool of %d did not converge in %v", len(p.ml), limit)
}

// traffic is what the members sent between two readings.
type traffic struct{ bytes, packets, streams, dropped int64 }

func (p *simPool) traffic() traffic {
	var s traffic
	for _, tr := range p.tr {
		s.bytes += tr.sentBytes.Load()
		s.packets += tr.sentPackets.Load()
		s.streams += tr.streams.Load()
		s.dropped += tr.dropped.Load()
	}
	return s
}

func (a traffic) minus(b traffic) traffic {
	return traffic{a.bytes - b.bytes, a.packets - b.packets, a.streams - b.streams, a.dropped - b.dropped}
}

// kill silences member i and waits until every other member has seen it
// dead, or limit. It returns the detection times, sorted.
func (p *simPool) kill(i int, limit time.Duration) []time.Duration {
	p.mu.Lock()
	p.victim = p.ml[i].LocalNode().Name
	p.mu.Unlock()
	start := time.Now()
	p.tr[i].silent.Store(true)
	return p.waitAll(p.seenAt, start, limit)
}

// falseDeaths returns how many times a member that was not killed was
// reported dead.
func (p *simPool) falseDeaths() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.falseDe
}

// revive lets member i (killed) speak again, as after a network cut, and
// waits until every other member has seen it alive, or limit. It returns
// the times, sorted.
func (p *simPool) revive(i int, limit time.Duration) []time.Duration {
	p.mu.Lock()
	p.revived = true
	p.mu.Unlock()
	start := time.Now()
	p.tr[i].silent.Store(false)
	return p.waitAll(p.backAt, start, limit)
}

// waitAll waits until every member but the victim has a time in seen (one
// of p's maps, written under p.mu), or limit past start. It returns the
// times since start, sorted.
func (p *simPool) waitAll(seen map[string]time.Time, start time.Time, limit time.Duration) []time.Duration {
	for time.Since(start) < limit {
		time.Sleep(100 * time.Millisecond)
		p.mu.Lock()
		done := len(seen) == len(p.ml)-1
		p.mu.Unlock()
		if done {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var ds []time.Duration
	for _, at := range seen {
		ds = append(ds, at.Sub(start))
	}
	slices.Sort(ds)
	return ds
}

func (p *simPool) shutdown(t *testing.T) {
	for _, ml := range p.ml {
		if err := ml.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
	// Probes under way wait out their timeouts (virtual time) before their
	// goroutines return; the bubble must be empty when the test ends.
	time.Sleep(time.Minute)
}

// TestGossipSimSmoke kills one of 20 members: every other member must see it
// dead, and no member may be declared dead that was not killed.
func TestGossipSimSmoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		p := startSimPool(t, n)
		defer p.shutdown(t)
		if _, err := p.converge(time.Minute); err != nil {
			t.Fatal(err)
		}
		ds := p.kill(n/2, 5*time.Minute)
		if len(ds) != n-1 {
			t.Errorf("%d of %d members saw the killed member dead", len(ds), n-1)
		}
		if d := p.falseDeaths(); d != 0 {
			t.Errorf("%d deaths of members that were not killed", d)
		}
	})
}

// simResult is one row of the table.
type simResult struct {
	n                     int
	join                  time.Duration // virtual time to converge after the last join
	first, p50, p99, last time.Duration
	seen                  int
	steady, failure       traffic
	steadyFor, failureFor time.Duration
	falseDeaths           int
	suspicion             time.Duration // memberlist's shortest suspicion timeout at n
	back                  int           // members that saw the victim alive again
	back99                time.Duration // when 99 % did
}

// runSim measures one pool size: steady-state traffic over steadyFor after
// the pool settled, then a member's death.
func runSim(t *testing.T, n int) (r simResult) {
	synctest.Test(t, func(t *testing.T) {
		r.n = n
		p := startSimPool(t, n)
		defer p.shutdown(t)
		var err error
		if r.join, err = p.converge(10 * time.Minute); err != nil {
			t.Fatal(err)
		}
		// Let the join broadcasts drain, then measure one push/pull period.
		time.Sleep(time.Minute)
		r.steadyFor = pushPullPeriod(n)
		before := p.traffic()
		time.Sleep(r.steadyFor)
		r.steady = p.traffic().minus(before)

		before, start := p.traffic(), time.Now()
		ds := p.kill(n/2, 5*time.Minute)
		r.failure, r.failureFor = p.traffic().minus(before), time.Since(start)
		r.seen, r.falseDeaths = len(ds), p.falseDeaths()
		if len(ds) > 0 {
			r.first, r.last = ds[0], ds[len(ds)-1]
			r.p50, r.p99 = quantile(ds, n-1, 0.50), quantile(ds, n-1, 0.99)
		}
		r.suspicion = suspicionTimeoutFor(n)
		back := p.revive(n/2, 3*pushPullPeriod(n))
		r.back = len(back)
		if len(back) > 0 {
			r.back99 = quantile(back, n-1, 0.99)
		}
	})
	return r
}

// quantile returns the time by which fraction q of the total observers saw
// the death (the largest duration when fewer did).
func quantile(ds []time.Duration, total int, q float64) time.Duration {
	k := int(q*float64(total)+0.999999) - 1
	if k >= len(ds) {
		return ds[len(ds)-1]
	}
	return ds[max(k, 0)]
}

// pushPullPeriod is memberlist's push/pull interval at n members (it grows
// with log2(n) past 32 members).
func pushPullPeriod(n int) time.Duration {
	c := profileConfig(ProfileLAN)
	if n <= 32 {
		return c.PushPullInterval
	}
	mult := math.Ceil(math.Log2(float64(n))-math.Log2(32)) + 1
	return time.Duration(mult) * c.PushPullInterval
}

// suspicionTimeoutFor is memberlist's shortest suspicion timeout at n
// members: SuspicionMult × max(1, log10 n) × ProbeInterval; the longest is
// SuspicionMaxTimeoutMult times that.
func suspicionTimeoutFor(n int) time.Duration {
	c := profileConfig(ProfileLAN)
	return time.Duration(float64(c.SuspicionMult) * math.Max(1, math.Log10(float64(n))) * float64(c.ProbeInterval))
}

// TestGossipSimTable runs the simulation at each -gossipsim.sizes and
// prints the table docs/scale.md quotes.
func TestGossipSimTable(t *testing.T) {
	if *simSizes == "" {
		t.Skip("no -gossipsim.sizes (make gossip-sim runs 100,250,500)")
	}
	var rows []simResult
	for _, f := range strings.Split(*simSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 3 {
			t.Fatal(errors.Join(fmt.Errorf("bad size %q", f), err))
		}
		wall := time.Now()
		r := runSim(t, n)
		t.Logf("%d members simulated in %v of wall time", n, time.Since(wall).Round(time.Second))
		rows = append(rows, r)
	}
	printSimTable(os.Stdout, rows)
}

func printSimTable(w io.Writer, rows []simResult) {
	c := profileConfig(ProfileLAN)
	fmt.Fprintf(w, "\nmemberlist %s profile: probe %v/%v, suspicion mult %d (max x%d), gossip %d nodes every %v, retransmit mult %d, push/pull %v, dead reclaim %v\n",
		"LAN", c.ProbeInterval, c.ProbeTimeout, c.SuspicionMult, c.SuspicionMaxTimeoutMult, c.GossipNodes, c.GossipInterval, c.RetransmitMult, c.PushPullInterval, c.DeadNodeReclaimTime)
	fmt.Fprintf(w, "| members | min suspicion | converge | first dead | 50%% dead | 99%% dead | all | saw/others | false deaths | steady B/s | steady pkt/s | failure B/s | failure pkt/s | dropped | back 99%% | back |\n")
	fmt.Fprintf(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		per := func(tr traffic, d time.Duration) (float64, float64) {
			s := float64(r.n) * d.Seconds()
			return float64(tr.bytes) / s, float64(tr.packets) / s
		}
		sb, sp := per(r.steady, r.steadyFor)
		fb, fp := per(r.failure, r.failureFor)
		fmt.Fprintf(w, "| %d | %v | %v | %v | %v | %v | %v | %d/%d | %d | %.0f | %.1f | %.0f | %.1f | %d | %v | %d/%d |\n",
			r.n, r.suspicion.Round(100*time.Millisecond), r.join.Round(time.Second), r.first.Round(10*time.Millisecond), r.p50.Round(10*time.Millisecond),
			r.p99.Round(10*time.Millisecond), r.last.Round(10*time.Millisecond), r.seen, r.n-1, r.falseDeaths,
			sb, sp, fb, fp, r.steady.dropped+r.failure.dropped, r.back99.Round(10*time.Millisecond), r.back, r.n-1)
	}
}
