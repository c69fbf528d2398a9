package campaign

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// regOp is an operation's input: a write of value (failed: the client
// saw it fail), or a read (value unused; the read's output is the value
// it returned).
type regOp struct {
	key    blockKey
	write  bool
	failed bool
	value  uint64
}

// history records every read and write the mappings served during a
// round, with invoke and return times on one monotonic clock. A read that
// failed changed nothing and is left out (counted in readsFailed).
//
// A write that failed (or never returned) may have taken effect, at any
// time from its invoke until no path for it is left, or not at all. Its
// return is open-ended (math.MaxInt64) until the round's checks set
// failedBy (failedWritesEnd): the time after which no failed write of the
// round can land. The check gives every failed write that return. The
// register model lets a failed write's step leave the value as it was or
// set it (registerModel), so a failed write is never dropped: its value
// may be read from its invoke on, and after failedBy only if nothing
// overwrote it since.
type history struct {
	start time.Time

	mu          sync.Mutex
	ops         []porcupine.Operation
	clients     int
	readsFailed int
	failedBy    int64 // 0: not set, failed writes stay open-ended
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
	op := porcupine.Operation{ClientId: client, Input: regOp{key: k, write: true, failed: err != nil, value: v}, Call: call, Return: ret}
	if err != nil {
		op.Return, op.Metadata = math.MaxInt64, "failed: "+err.Error()
	}
	h.add(op)
}

// read records a read of k that returned v.
func (h *history) read(client int, k blockKey, v uint64, call, ret int64) {
	h.add(porcupine.Operation{ClientId: client, Input: regOp{key: k}, Output: v, Call: call, Return: ret})
}

// failedWritesEnd records that no write that failed so far can land
// from now on (cluster.check calls it once the owner that took the
// round's writes has exited; see there why none can land after).
func (h *history) failedWritesEnd() { h.failedWritesEndAt(h.now()) }

func (h *history) failedWritesEndAt(t int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failedBy = t
}

// bounded returns ops with each failed write's return at failedBy (when
// set and after its invoke).
func (h *history) bounded(ops []porcupine.Operation) []porcupine.Operation {
	if h.failedBy == 0 {
		return ops
	}
	for i, op := range ops {
		if op.Input.(regOp).failed && op.Call < h.failedBy {
			ops[i].Return = h.failedBy
		}
	}
	return ops
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
// returns it. A write that failed either set it or left it as it was (at
// its linearization point, somewhere between its invoke and its return:
// history.failedBy): the model is nondeterministic and porcupine checks
// the set of values the block may hold. Before, a failed write had to set
// the value at some point, and with it open-ended the search tried each
// subset of a block's pending failed writes before every read: a block
// with tens of failed writes took the check past its budget. A read
// returning badValue is never legal, except of a block whose starting
// value is not known (anyValue: its first read fixes it).
var registerModel = (&porcupine.NondeterministicModel{
	Partition: partitionByBlock,
	Init:      func() []any { return []any{anyValue} },
	Step: func(state, input, output any) []any {
		s, in := state.(uint64), input.(regOp)
		switch {
		case in.write && in.failed:
			return []any{s, in.value}
		case in.write:
			return []any{in.value}
		}
		got := output.(uint64)
		switch {
		case s == anyValue && got == badValue:
			return []any{anyValue} // still not known
		case s == anyValue, got == s && got != badValue:
			return []any{got}
		}
		return nil
	},
	Hash: func(state any) uint64 { return state.(uint64) },
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
}).ToModel()

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
// runs out is reported (neither passed nor failed) and its history saved
// (savedHistory) for an offline check with a longer budget
// (TestCheckSavedHistory).
var checkTimeout = flag.Duration("campaign.check-timeout", envDuration("CAMPAIGN_CHECK_TIMEOUT", 2*time.Minute),
	"budget of one round's history check; default $CAMPAIGN_CHECK_TIMEOUT, else 2m")

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// check checks each block's history as a register for linearizability;
// initial gives a block's value when the round began (anyValue when not
// known). A failing history is saved with porcupine's visualisation (the
// failing blocks only) to dir/name; one whose check runs out of budget
// is saved as gzipped JSON (savedHistory) to dir/name with .json.gz for
// .html.
func (h *history) check(initial func(blockKey) uint64, dir, name string) (historyResult, error) {
	h.mu.Lock()
	ops := h.bounded(append([]porcupine.Operation(nil), h.ops...))
	res := historyResult{ops: len(h.ops), readsFailed: h.readsFailed}
	h.mu.Unlock()
	ops = append(ops, initialWrites(ops, initial, h.clients)...)
	return checkOps(ops, res, dir, name)
}

// checkOps checks ops (initial writes included) as check does.
func checkOps(saved []porcupine.Operation, res historyResult, dir, name string) (historyResult, error) {
	ops := narrowUnread(saved)
	parts := partitionByBlock(ops)
	res.blocks = len(parts)
	t0 := time.Now()
	r := porcupine.CheckOperationsTimeout(registerModel, ops, *checkTimeout)
	res.took = time.Since(t0)
	switch r {
	case porcupine.Ok:
		return res, nil
	case porcupine.Unknown:
		err := fmt.Errorf("history check of %d operations on %d blocks ran out after %v: neither passed nor failed", res.ops, res.blocks, *checkTimeout)
		res.saved = filepath.Join(dir, strings.TrimSuffix(name, ".html")+".json.gz")
		if serr := saveHistory(res.saved, saved); serr != nil {
			return res, errors.Join(err, serr)
		}
		return res, fmt.Errorf("%w (history saved: %s; check it with CAMPAIGN_HISTORY=%s CAMPAIGN_CHECK_TIMEOUT=30m go test ./test/campaign -run TestCheckSavedHistory -v)",
			err, res.saved, res.saved)
	}
	var bad []porcupine.Operation
	var keys []blockKey
	for _, p := range parts {
		if porcupine.CheckOperationsTimeout(registerModel, p, *checkTimeout) == porcupine.Illegal {
			bad = append(bad, p...)
			keys = append(keys, p[0].Input.(regOp).key)
		}
	}
	err := fmt.Errorf("%w: %d of %d blocks, first: volume %s, block %d", errNotLinearizable, len(keys), res.blocks, keys[0].volume, keys[0].block)
	_, info := porcupine.CheckOperationsVerbose(registerModel, bad, *checkTimeout)
	res.saved = filepath.Join(dir, name)
	if verr := os.MkdirAll(dir, 0o755); verr != nil {
		return res, errors.Join(err, verr)
	}
	if verr := porcupine.VisualizePath(registerModel, info, res.saved); verr != nil {
		return res, errors.Join(err, fmt.Errorf("saving the visualisation: %w", verr))
	}
	return res, fmt.Errorf("%w (visualisation: %s)", err, res.saved)
}

// narrowUnread returns ops with each failed write whose value no read
// returned narrowed to its invoke (its return set to its call). Where
// such a write lands changes no read (every read returned another value;
// each version is written once), so the history with it at its invoke,
// not landing, is linearizable exactly when the one with its whole
// interval is: the check's answer is the same. Its cost is not: porcupine
// tries each subset of a block's pending failed writes before each read,
// and a fault window leaves tens of them on a hot block, none read.
func narrowUnread(ops []porcupine.Operation) []porcupine.Operation {
	type read struct {
		key   blockKey
		value uint64
	}
	seen := map[read]bool{}
	for _, op := range ops {
		if in := op.Input.(regOp); !in.write {
			seen[read{in.key, op.Output.(uint64)}] = true
		}
	}
	out := append([]porcupine.Operation(nil), ops...)
	for i, op := range out {
		if in := op.Input.(regOp); in.failed && !seen[read{in.key, in.value}] {
			out[i].Return = op.Call
		}
	}
	return out
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

// savedOp is one operation of a saved history (savedHistory).
type savedOp struct {
	Client int    `json:"client"`
	Volume string `json:"volume"`
	Block  int64  `json:"block"`
	Write  bool   `json:"write,omitempty"`
	Failed bool   `json:"failed,omitempty"`
	Value  uint64 `json:"value"` // written, or read
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
}

// savedHistory is a round's history as checked (initial writes included,
// failed writes with their bounded return), as gzipped JSON (a round of
// 300,000 reads and writes saves about 4 MB).
type savedHistory struct {
	Ops []savedOp `json:"ops"`
}

// saveHistory writes ops as a savedHistory to path.
func saveHistory(path string, ops []porcupine.Operation) error {
	var sh savedHistory
	for _, op := range ops {
		in := op.Input.(regOp)
		so := savedOp{Client: op.ClientId, Volume: in.key.volume, Block: in.key.block, Write: in.write, Failed: in.failed,
			Value: in.value, Call: op.Call, Return: op.Return}
		if !in.write {
			so.Value = op.Output.(uint64)
		}
		sh.Ops = append(sh.Ops, so)
	}
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	var f *os.File
	if err == nil {
		f, err = os.Create(path)
	}
	if err == nil {
		zw := gzip.NewWriter(f)
		err = errors.Join(json.NewEncoder(zw).Encode(sh), zw.Close(), f.Close())
	}
	if err != nil {
		return fmt.Errorf("saving the history: %w", err)
	}
	return nil
}

// loadHistory reads a history saveHistory wrote.
func loadHistory(path string) ([]porcupine.Operation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var sh savedHistory
	if err := json.NewDecoder(zr).Decode(&sh); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ops := make([]porcupine.Operation, 0, len(sh.Ops))
	for _, so := range sh.Ops {
		if so.Call > so.Return {
			return nil, fmt.Errorf("%s: an operation returns (%d) before its invoke (%d)", path, so.Return, so.Call)
		}
		op := porcupine.Operation{ClientId: so.Client, Input: regOp{key: blockKey{so.Volume, so.Block}, write: so.Write, failed: so.Failed, value: so.Value},
			Call: so.Call, Return: so.Return}
		if !so.Write {
			op.Input = regOp{key: blockKey{so.Volume, so.Block}}
			op.Output = so.Value
		}
		ops = append(ops, op)
	}
	return ops, nil
}
