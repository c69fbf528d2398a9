package campaign

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/nvstripe/nvstripe/internal/faultnet"
)

// fault is one kind of injection: it breaks something for a while, and the
// round's heal brings it back.
type fault struct {
	name string
	do   func(c *cluster, rng *rand.Rand)
	// weight is how often compound rounds draw the kind (0 counts as 1):
	// more for those that touch the write log (the owner's crash, stop
	// or partition), moves (a target lost until out, the controller) and
	// leases (etcd stalled past the TTL, the owner stopped).
	weight int
}

// pause is how long a fault lasts: 0.5 to 3 s.
func pause(rng *rand.Rand) time.Duration {
	return 500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))
}

// pastLoss is how long a partition of one client lasts: 6 to 10 s, past
// the 5 s a mapping's IO waits for an unreachable namespace before it
// works around it (volclient.NamespaceOptions.ControllerLossTimeout).
func pastLoss(rng *rand.Rand) time.Duration {
	return 6*time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
}

// The source addresses of the owner's and the controller's connections to
// the targets (their --host-traddr), which the per-source faults name; the
// other processes connect from 127.0.0.1.
var (
	ownerSrc = netip.MustParseAddr("127.0.0.2")
	ctlSrc   = netip.MustParseAddr("127.0.0.3")
)

// killFor kills p and leaves it dead for a pause (heal restarts it).
func killFor(p func(*cluster, *rand.Rand) *proc) func(*cluster, *rand.Rand) {
	return func(c *cluster, rng *rand.Rand) {
		p(c, rng).kill()
		time.Sleep(pause(rng))
	}
}

// stopFor stops p with SIGSTOP for d, then continues it.
func stopFor(p func(*cluster, *rand.Rand) *proc, d func(*rand.Rand) time.Duration) func(*cluster, *rand.Rand) {
	return func(c *cluster, rng *rand.Rand) {
		x := p(c, rng)
		x.stop()
		time.Sleep(d(rng))
		x.cont()
	}
}

// onProxies applies fn to the proxies of one or two targets (never more than the
// volumes' m = 2) for a pause, then heals them.
func onProxies(fn func(*faultnet.Proxy, *rand.Rand)) func(*cluster, *rand.Rand) {
	return func(c *cluster, rng *rand.Rand) {
		picked := rng.Perm(len(c.proxies))[:1+rng.IntN(2)]
		for _, i := range picked {
			fn(c.proxies[i], rng)
		}
		time.Sleep(pause(rng))
		for _, i := range picked {
			c.proxies[i].Heal()
		}
	}
}

// cutFrom partitions the connections from src (and from src only) to the
// targets picked, noting it in the process log; heal ends it.
func (c *cluster) cutFrom(src netip.Addr, who string, picked []int) {
	var hosts []string
	for _, i := range picked {
		c.proxies[i].PartitionFrom(src)
		hosts = append(hosts, fmt.Sprintf("h%d", i))
	}
	fmt.Fprintf(c.logw, "campaign: %s (%s) cut off from %v\n", who, src, hosts)
}

// loseTarget kills target i and waits until the controller marks its
// namespace out (it rebuilds the shards on the others); heal restarts it.
func (c *cluster) loseTarget(i int) {
	c.targets[i].kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.waitState(ctx, c.store, fmt.Sprintf("h%d", i), "out", outAfter+30*time.Second)
}

func aTarget(c *cluster, rng *rand.Rand) *proc { return c.targets[rng.IntN(len(c.targets))] }
func theEtcd(c *cluster, _ *rand.Rand) *proc   { return c.etcd }
func theCtl(c *cluster, _ *rand.Rand) *proc    { return c.ctl }
func theOwner(c *cluster, _ *rand.Rand) *proc  { return c.owner }
func theReader(c *cluster, _ *rand.Rand) *proc { return c.reader }

// past the owner's lease TTL (10 s): the mapping is fenced.
func pastTTL(*rand.Rand) time.Duration { return 12 * time.Second }

// faults are the kinds of fault; round seed S injects faults[S mod
// len(faults)], so consecutive seeds go through every kind and a seed
// replays its kind. The CI seed's three rounds get the last two and the
// first: the owner cut off from targets, the controller cut off from
// targets while it rebuilds another's shards, a target killed. The network faults
// act on a target's proxy, which every client of that target goes through
// (the mappings and the controller's moves; liveness is gossiped
// directly); the last two only on the connections of one client (by its
// source address: the owner and the controller bind their own, see
// ownerSrc), so the others still reach the target.
var faults = []fault{
	{"kill -9 target", killFor(aTarget), 1},
	{"SIGSTOP target", stopFor(aTarget, pause), 1},
	// Down past outAfter: the controller marks the namespace out and
	// rebuilds its shards on the others.
	{"lose target (kill -9 until out)", func(c *cluster, rng *rand.Rand) { c.loseTarget(rng.IntN(len(c.targets))) }, 3},
	{"kill -9 owner", killFor(theOwner), 3},
	{"partition targets", onProxies(func(p *faultnet.Proxy, _ *rand.Rand) { p.Partition() }), 1},
	// A start that fails is logged; the heal starts the target again (a
	// compound round runs its faults apart from the test's goroutine).
	{"restart target", func(c *cluster, rng *rand.Rand) {
		p := aTarget(c, rng)
		if !p.term(stopWait) {
			p.kill()
		}
		if err := p.start(60 * time.Second); err != nil {
			fmt.Fprintf(c.logw, "campaign: restarting %s: %v\n", p.name, err)
		}
	}, 2},
	{"kill -9 etcd", killFor(theEtcd), 2},
	{"SIGSTOP etcd", stopFor(theEtcd, pause), 2},
	{"SIGSTOP etcd 12s", stopFor(theEtcd, pastTTL), 3},
	{"kill -9 controller", killFor(theCtl), 2},
	{"SIGSTOP controller", stopFor(theCtl, pause), 2},
	{"SIGSTOP owner", stopFor(theOwner, pause), 3},
	{"kill -9 reader", killFor(theReader), 2},
	{"SIGSTOP reader", stopFor(theReader, pause), 2},
	{"stall targets", onProxies(func(p *faultnet.Proxy, _ *rand.Rand) { p.Stall() }), 1},
	{"delay targets", onProxies(func(p *faultnet.Proxy, rng *rand.Rand) {
		p.Delay(time.Duration(10+rng.IntN(490)) * time.Millisecond)
	}), 1},
	{"reset target connections", func(c *cluster, rng *rand.Rand) {
		for range 1 + rng.IntN(4) {
			c.proxies[rng.IntN(len(c.proxies))].Reset()
			time.Sleep(pause(rng) / 4)
		}
	}, 1},
	// The owner alone loses one or two targets, past its IO's wait: it
	// writes around them (stale marks) while the controller, which still
	// reaches them and hears them gossip, sees them healthy.
	{"partition owner from targets", func(c *cluster, rng *rand.Rand) {
		c.cutFrom(ownerSrc, "the owner", rng.Perm(len(c.proxies))[:1+rng.IntN(2)])
		time.Sleep(pastLoss(rng))
	}, 3},
	// The controller alone loses one or two targets while a third is lost
	// and its shards rebuilt: the controller's own moves (of the volume
	// the owner does not map read-write) cannot read or write the cut-off
	// targets, which it still judges alive by gossip and may pick as
	// destinations (cut off from two, it has too few shards of some
	// segments to rebuild them until the heal); the owner reaches them and
	// writes on.
	{"partition controller from targets, lose another", func(c *cluster, rng *rand.Rand) {
		perm := rng.Perm(len(c.proxies))
		n := 1 + rng.IntN(2)
		c.cutFrom(ctlSrc, "the controller", perm[:n])
		c.loseTarget(perm[n])
		time.Sleep(pause(rng))
	}, 3},
}
