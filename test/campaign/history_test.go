package campaign

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// errNotLinearizable is the finding of the history check: some block's
// reads and writes cannot be ordered as those of one register.
var errNotLinearizable = errors.New("history not linearizable")

// Values a block's register takes besides the versions written.
const (
	// anyValue is the starting value of a block whose content is not
	// known (a write that failed before the round may have landed, or an
	// earlier round lost it): its first read may return anything.
	anyValue uint64 = math.MaxUint64
	// badValue is what a read returns that holds no version of its block
	// (corrupt, torn, or another block's content): no write wrote it.
	badValue uint64 = math.MaxUint64 - 1
)

// blockKey names one block of one volume: one register.
type blockKey struct {
	volume string
	block  int64
}

// regOp is an operation's input: a write of value, or a read (value
// unused; the read's output is the value it returned).
type regOp struct {
	key   blockKey
	write bool
	value uint64
}

// history records every read and write the mappings served during a
// round, with invoke and return times on one monotonic clock. A write
// that failed or never returned may have happened at any time after its
// invoke: its return time is open-ended (math.MaxInt64), which is how
// porcupine models an indeterminate operation. A read that failed
// changed nothing and is left out (counted in readsFailed).
type history struct {
	start time.Time

	mu          sync.Mutex
	ops         []porcupine.Operation
	clients     int
	readsFailed int
}

func newHistory() *history { return &history{start: time.Now()} }

// now is the time since the round began, in ns; 0 and 1 are the starting
// writes' (initialWrites).
func (h *history) now() int64 { return int64(time.Since(h.start)) + 2 }

// client returns a new client id. A worker takes one when it starts and
// after every failed operation (its failed write may still be pending, so
// the worker goes on as another client, as Jepsen does after a crash).
func (h *history) client() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients++
	return h.clients - 1
}

// write records a write of value v to k invoked at call and acknowledged
// at ret, or, when err is not nil, failed (its error goes with it into
// the visualisation).
func (h *history) write(client int, k blockKey, v uint64, call, ret int64, err error) {
	op := porcupine.Operation{ClientId: client, Input: regOp{key: k, write: true, value: v}, Call: call, Return: ret}
	if err != nil {
		op.Return, op.Metadata = math.MaxInt64, "failed: "+err.Error()
	}
	h.add(op)
}

// read records a read of k that returned v.
func (h *history) read(client int, k blockKey, v uint64, call, ret int64) {
	h.add(porcupine.Operation{ClientId: client, Input: regOp{key: k}, Output: v, Call: call, Return: ret})
}

func (h *history) readFailed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readsFailed++
}

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// registerModel is a block as a register: a write sets it, a read
// returns it. A read returning badValue is never legal, except of a block
// whose starting value is not known (anyValue: its first read fixes it).
var registerModel = porcupine.Model{
	Partition: partitionByBlock,
	Init:      func() any { return anyValue },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(uint64), input.(regOp)
		if in.write {
			return true, in.value
		}
		got := output.(uint64)
		if s == anyValue {
			if got == badValue {
				return true, anyValue // still not known
			}
			return true, got
		}
		return got == s && got != badValue, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regOp)
		if in.write {
			return fmt.Sprintf("write %s", describeValue(in.value))
		}
		return fmt.Sprintf("read %s", describeValue(output.(uint64)))
	},
	DescribeState: func(state any) string { return describeValue(state.(uint64)) },
	DescribeOperationMetadata: func(info any) string {
		s, _ := info.(string)
		return s
	},
}

func describeValue(v uint64) string {
	switch v {
	case anyValue:
		return "unknown"
	case badValue:
		return "no version (bad content)"
	case roVersion:
		return "ro fill"
	}
	return fmt.Sprintf("v%d", v)
}

// partitionByBlock splits a history into one per block (each block is
// its own register: porcupine checks them apart, in parallel).
func partitionByBlock(ops []porcupine.Operation) [][]porcupine.Operation {
	by := map[blockKey][]porcupine.Operation{}
	for _, op := range ops {
		k := op.Input.(regOp).key
		by[k] = append(by[k], op)
	}
	keys := make([]blockKey, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].volume != keys[j].volume {
			return keys[i].volume < keys[j].volume
		}
		return keys[i].block < keys[j].block
	})
	out := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		out[i] = by[k]
	}
	return out
}

// historyResult is what a history check did.
type historyResult struct {
	ops         int // reads and writes checked
	readsFailed int
	blocks      int
	took        time.Duration
	saved       string // the visualisation of a failing history, if any
}

// checkTimeout bounds the check of one round's history; a check that
// runs out is reported (neither passed nor failed).
const checkTimeout = 2 * time.Minute

// check checks each block's history as a register for linearizability;
// initial gives a block's value when the round began (anyValue when not
// known). A failing history is saved with porcupine's visualisation (the
// failing blocks only) to dir/name.
func (h *history) check(initial func(blockKey) uint64, dir, name string) (historyResult, error) {
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	res := historyResult{ops: len(h.ops), readsFailed: h.readsFailed}
	h.mu.Unlock()
	ops = append(ops, initialWrites(ops, initial, h.clients)...)
	parts := partitionByBlock(ops)
	res.blocks = len(parts)
	t0 := time.Now()
	r := porcupine.CheckOperationsTimeout(registerModel, ops, checkTimeout)
	res.took = time.Since(t0)
	switch r {
	case porcupine.Ok:
		return res, nil
	case porcupine.Unknown:
		return res, fmt.Errorf("history check of %d operations on %d blocks ran out after %v: neither passed nor failed", res.ops, res.blocks, checkTimeout)
	}
	var bad []porcupine.Operation
	var keys []blockKey
	for _, p := range parts {
		if !porcupine.CheckOperations(registerModel, p) {
			bad = append(bad, p...)
			keys = append(keys, p[0].Input.(regOp).key)
		}
	}
	err := fmt.Errorf("%w: %d of %d blocks, first: volume %s, block %d", errNotLinearizable, len(keys), res.blocks, keys[0].volume, keys[0].block)
	_, info := porcupine.CheckOperationsVerbose(registerModel, bad, checkTimeout)
	res.saved = filepath.Join(dir, name)
	if verr := os.MkdirAll(dir, 0o755); verr != nil {
		return res, errors.Join(err, verr)
	}
	if verr := porcupine.VisualizePath(registerModel, info, res.saved); verr != nil {
		return res, errors.Join(err, fmt.Errorf("saving the visualisation: %w", verr))
	}
	return res, fmt.Errorf("%w (visualisation: %s)", err, res.saved)
}

// initialWrites are the writes of each block's starting value, before
// every recorded operation (call 0, return 1), for the blocks whose value
// is known.
func initialWrites(ops []porcupine.Operation, initial func(blockKey) uint64, client int) []porcupine.Operation {
	seen := map[blockKey]bool{}
	var out []porcupine.Operation
	for _, op := range ops {
		k := op.Input.(regOp).key
		if seen[k] {
			continue
		}
		seen[k] = true
		if v := initial(k); v != anyValue {
			out = append(out, porcupine.Operation{ClientId: client, Input: regOp{key: k, write: true, value: v}, Call: 0, Return: 1})
		}
	}
	return out
}
