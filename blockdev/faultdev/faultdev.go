// Package faultdev wraps a blockdev.Device and injects faults into its IO:
// errors (always, with a probability, or after N good operations), latency,
// torn writes, silently corrupted reads and silently dropped writes, chosen by operation kind and
// offset range. It also counts the operations it sees, for IO-count tests.
//
// Rules are added and removed at run time. Every random choice comes from one
// generator seeded by New, so a run is reproducible for a given seed and a
// given sequence of operations (with concurrent callers the sequence is
// whatever order the calls reach the wrapper in).
//
// Concurrency: a Dev is safe for concurrent use, like every Device. Rules and
// the generator sit behind one mutex that is never held across inner IO or
// a delay.
package faultdev

import (
	"fmt"
	"math/bits"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
)

// Op is a set of operation kinds, used to select which calls a Rule
// matches: one bit per blockdev.Op.
type Op uint8

// Operation kinds. OpWrite covers plain and FUA writes.
const (
	OpRead        = Op(1) << blockdev.OpRead
	OpWrite       = Op(1) << blockdev.OpWrite
	OpFlush       = Op(1) << blockdev.OpFlush
	OpWriteZeroes = Op(1) << blockdev.OpWriteZeroes
	OpTrim        = Op(1) << blockdev.OpTrim
	// OpAll matches every kind; a Rule with Ops == 0 means the same.
	OpAll = OpRead | OpWrite | OpFlush | OpWriteZeroes | OpTrim
)

// String names a single kind as blockdev.Op does (read, write, flush,
// write_zeroes, trim), and a set by its bits.
func (o Op) String() string {
	if o != 0 && o&(o-1) == 0 && o <= OpAll {
		return blockdev.Op(bits.TrailingZeros8(uint8(o))).String()
	}
	return fmt.Sprintf("ops(%#x)", uint8(o))
}

// Action is what a triggered Rule does.
type Action uint8

const (
	// Fail returns the rule's error without passing the call on.
	Fail Action = iota
	// Tear (writes only; other kinds fail as with Fail) writes a random
	// proper prefix of the blocks of the request, possibly none, then
	// returns the rule's error.
	Tear
	// Corrupt (reads only; other kinds pass untouched) performs the read and
	// flips one random bit of the result, then reports success.
	Corrupt
	// Delay waits Latency (or until the context is done) and then passes the
	// call on. Delays of several triggered rules add up.
	Delay
	// Drop (writes, write-zeroes, trims and flushes; reads pass untouched)
	// reports success without passing the call on: a device that loses
	// writes it acknowledged (dm-flakey drop_writes, a firmware lost write).
	Drop
)

// Rule selects calls and says what to do with them. The zero Rule fails
// every call with an error of class ErrUnavailable.
type Rule struct {
	Action Action
	// Ops selects operation kinds. Default (0): every kind.
	Ops Op
	// Off and Len select calls overlapping [Off, Off+Len). Default (Len 0):
	// every offset. A rule with a range never matches Flush.
	Off, Len int64
	// After lets the first After matching calls pass untouched: "fail after
	// N". Default 0.
	After int
	// Prob is the chance that a matching call (past After) triggers the
	// rule. Default (0): 1, every time. Values above 1 count as 1.
	Prob float64
	// Times caps how often the rule triggers. Default (0): no cap.
	Times int
	// Err is returned by Fail and Tear, wrapped with the call's details so
	// that errors.Is(returned, Err) holds. Default (nil): an error of class
	// blockdev.ErrUnavailable.
	Err error
	// Latency is the wait of a Delay rule.
	Latency time.Duration
}

// RuleID names an added rule for Remove.
type RuleID uint64

type rule struct {
	Rule
	id      RuleID
	matched int // calls matched so far
	fired   int // times triggered so far
}

// Stats counts the calls a Dev has seen, faulty or not, including those
// failed by a rule or while down. Bytes count request lengths.
type Stats struct {
	Reads, Writes, FUAWrites, Flushes, WriteZeroes, Trims int64
	ReadBytes, WriteBytes                                 int64
	// Injected counts calls a Fail, Tear, Corrupt or Drop rule (or SetDown)
	// acted on.
	Injected int64
}

// Dev is the fault-injecting wrapper. Close closes the wrapped device.
type Dev struct {
	inner blockdev.Device
	down  atomic.Bool

	mu     sync.Mutex
	rng    *rand.Rand // REQUIRES: mu held
	rules  []*rule    // in order added; REQUIRES: mu held
	nextID RuleID     // REQUIRES: mu held
	stats  Stats      // REQUIRES: mu held
}

var (
	_ blockdev.Device             = (*Dev)(nil)
	_ blockdev.FUAWriter          = (*Dev)(nil)
	_ blockdev.AllocationReporter = (*Dev)(nil)
)

// New wraps dev. seed drives every random choice of the rules.
func New(dev blockdev.Device, seed int64) *Dev {
	return &Dev{inner: dev, rng: rand.New(rand.NewSource(seed))}
}

// Inner returns the wrapped device.
func (d *Dev) Inner() blockdev.Device { return d.inner }

// Add installs r after the rules already present and returns its id.
func (d *Dev) Add(r Rule) RuleID {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nextID++
	d.rules = append(d.rules, &rule{Rule: r, id: d.nextID})
	return d.nextID
}

// Remove uninstalls the rule with the given id; it reports whether it was
// present.
func (d *Dev) Remove(id RuleID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range d.rules {
		if r.id == id {
			d.rules = append(d.rules[:i:i], d.rules[i+1:]...)
			return true
		}
	}
	return false
}

// Clear removes every rule.
func (d *Dev) Clear() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rules = nil
}

// Fired reports how often the rule with the given id has triggered (0 when it
// is not installed).
func (d *Dev) Fired(id RuleID) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.rules {
		if r.id == id {
			return r.fired
		}
	}
	return 0
}

// SetDown takes the whole device down (every call fails with ErrUnavailable
// without reaching the wrapped device) or brings it back up.
func (d *Dev) SetDown(down bool) { d.down.Store(down) }

// Down reports whether the device is set down.
func (d *Dev) Down() bool { return d.down.Load() }

// Stats returns the counters since New or the last ResetStats.
func (d *Dev) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// ResetStats zeroes the counters.
func (d *Dev) ResetStats() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats = Stats{}
}

func (d *Dev) Size() int64    { return d.inner.Size() }
func (d *Dev) BlockSize() int { return d.inner.BlockSize() }
func (d *Dev) Close() error   { return d.inner.Close() }
