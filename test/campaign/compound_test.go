package campaign

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// A compound round overlaps two or three faults. Half of the rounds take
// one of the pairs below (where one fault meets another on the write log,
// a move or a lease); the others draw two kinds by weight (fault.weight:
// those that touch the write log, moves and leases weigh more). A third
// kind joins one round in three. Every choice comes from the round's
// seed, so `make campaign SEED=S ROUNDS=1 COMPOUND=1` replays the round's
// schedule.
var compoundPairs = [][2]string{
	{"lose target (kill -9 until out)", "kill -9 owner"},     // the owner restarts while a shard rebuilds
	{"lose target (kill -9 until out)", "SIGSTOP etcd 12s"},  // etcd stalls during a move, past the lease
	{"lose target (kill -9 until out)", "SIGSTOP reader"},    // a reader paused while its shards move
	{"lose target (kill -9 until out)", "partition targets"}, // a partition during a rebuild
	{"lose target (kill -9 until out)", "kill -9 controller"},
	{"partition owner from targets", "kill -9 owner"}, // a crash while writing around lost targets
	{"partition owner from targets", "kill -9 target"},
	{"kill -9 owner", "kill -9 target"}, // a crash plus a lost shard
	{"SIGSTOP owner", "SIGSTOP etcd 12s"},
	{"restart target", "kill -9 owner"},
	{"partition controller from targets, lose another", "kill -9 owner"},
	{"partition controller from targets, lose another", "SIGSTOP etcd"},
	{"drain target", "SIGSTOP reader"}, // a reader paused while a drain moves its shards
}

// compoundOnly are kinds of fault only compoundPairs name: in faults they
// would change the kind every single-fault seed replays, and the draws of
// the other compound rounds.
var compoundOnly = []fault{
	// An operator drains a target (`admin drain`): the controller moves
	// its shards away, one per segment at a time, as for a rebuild; the
	// round's checks put it back in service (returnOut).
	{"drain target", func(c *cluster, rng *rand.Rand) {
		h := fmt.Sprintf("h%d", rng.IntN(len(c.targets)))
		if out, err := c.tryAdmin("admin", "drain", h); err != nil {
			fmt.Fprintf(c.logw, "campaign: admin drain %s: %v: %s\n", h, err, out)
			return
		}
		fmt.Fprintf(c.logw, "campaign: draining %s\n", h)
		time.Sleep(pause(rng))
	}, 1},
}

// pickFaults returns the faults of round seed sd: faults[sd mod
// len(faults)] alone, or, compound, two or three drawn with rng.
func pickFaults(sd uint64, compound bool, rng *rand.Rand) []fault {
	if !compound {
		return []fault{faults[sd%uint64(len(faults))]}
	}
	var picked []fault
	if rng.IntN(2) == 0 {
		p := compoundPairs[rng.IntN(len(compoundPairs))]
		picked = []fault{faultNamed(p[0]), faultNamed(p[1])}
	} else {
		picked = []fault{drawFault(rng, nil)}
		picked = append(picked, drawFault(rng, picked))
	}
	if rng.IntN(3) == 0 {
		picked = append(picked, drawFault(rng, picked))
	}
	return picked
}

func faultNamed(name string) fault {
	for _, f := range append(faults[:len(faults):len(faults)], compoundOnly...) {
		if f.name == name {
			return f
		}
	}
	panic(fmt.Errorf("campaign: no fault named %q", name))
}

// drawFault draws a kind by weight, other than those in not.
func drawFault(rng *rand.Rand, not []fault) fault {
	total := 0
	var from []fault
	for _, f := range faults {
		if !hasFault(not, f.name) {
			from = append(from, f)
			total += f.weigh()
		}
	}
	n := rng.IntN(total)
	for _, f := range from {
		if n -= f.weigh(); n < 0 {
			return f
		}
	}
	return from[len(from)-1]
}

func hasFault(fs []fault, name string) bool {
	for _, f := range fs {
		if f.name == name {
			return true
		}
	}
	return false
}

func (f fault) weigh() int { return max(f.weight, 1) }

// faultNames is how a round's faults print: "a + b".
func faultNames(fs []fault) string {
	var names []string
	for _, f := range fs {
		names = append(names, f.name)
	}
	return strings.Join(names, " + ")
}

// strike runs the faults: the first at once, each next one after a delay
// (0 to 2 s) drawn with rng, so that they overlap; each with its own rng
// drawn before any starts. It returns when all have ended.
func strike(c *cluster, fs []fault, rng *rand.Rand) {
	if len(fs) == 1 {
		fs[0].do(c, rng)
		return
	}
	var wg sync.WaitGroup
	var after time.Duration
	for i, f := range fs {
		r := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		if i > 0 {
			after += time.Duration(rng.Int64N(int64(2 * time.Second)))
		}
		wait := after
		wg.Go(func() {
			time.Sleep(wait)
			fmt.Fprintf(c.logw, "campaign: fault %q starts\n", f.name)
			f.do(c, r)
			fmt.Fprintf(c.logw, "campaign: fault %q ends\n", f.name)
		})
	}
	wg.Wait()
}
