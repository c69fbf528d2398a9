package campaign

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestContentVersion: a block's content maps back to the version that
// wrote it; another block's content, a flipped bit or a torn block map to
// badValue; zeros are version 0.
func TestContentVersion(t *testing.T) {
	if v := version(7, content(7, 42)); v != 42 {
		t.Errorf("version of block 7's v42: %d", v)
	}
	if v := version(7, content(7, 0)); v != 0 {
		t.Errorf("version of zeros: %d", v)
	}
	if v := version(8, content(7, 42)); v != badValue {
		t.Errorf("block 7's content read at block 8: %d, want badValue", v)
	}
	p := content(7, 42)
	p[1000] ^= 1
	if v := version(7, p); v != badValue {
		t.Errorf("a flipped bit: %d, want badValue", v)
	}
	torn := append(content(7, 41)[:2048:2048], content(7, 42)[2048:]...)
	if v := version(7, torn); v != badValue {
		t.Errorf("a torn block: %d, want badValue", v)
	}
}

// TestHistoryCheck: the register check passes histories a register can
// produce and fails the others, saving the failing block's visualisation.
func TestHistoryCheck(t *testing.T) {
	k := blockKey{rwVolume, 3}
	known := func(blockKey) uint64 { return 5 }
	unknown := func(blockKey) uint64 { return anyValue }
	type op struct {
		write     bool
		v         uint64
		call, ret int64 // ret 0: a write that failed (open-ended)
	}
	for _, tc := range []struct {
		name    string
		initial func(blockKey) uint64
		ops     []op
		ok      bool
		// failedBy: the bound of the failed writes (history.failedWritesEnd);
		// 0: open-ended.
		failedBy int64
	}{
		{"read the starting value", known, []op{{false, 5, 10, 20}}, true, 0},
		{"read a write's value after it returned", known, []op{{true, 6, 10, 20}, {false, 6, 30, 40}}, true, 0},
		{"read the old value during the write", known, []op{{true, 6, 10, 40}, {false, 5, 20, 30}}, true, 0},
		{"read the new value during the write", known, []op{{true, 6, 10, 40}, {false, 6, 20, 30}}, true, 0},
		{"stale read after the write returned", known, []op{{true, 6, 10, 20}, {false, 5, 30, 40}}, false, 0},
		{"new value, then the old one again", known, []op{{true, 6, 10, 100}, {false, 6, 20, 30}, {false, 5, 40, 50}}, false, 0},
		{"a failed write that landed later", known, []op{{true, 6, 10, 0}, {false, 5, 20, 30}, {false, 6, 40, 50}}, true, 0},
		{"a failed write read before it began", known, []op{{false, 6, 2, 5}, {true, 6, 10, 0}}, false, 0},
		{"a value nobody wrote", known, []op{{false, 9, 10, 20}}, false, 0},
		{"bad content", known, []op{{false, badValue, 10, 20}}, false, 0},
		{"a block whose value is not known", unknown, []op{{false, 9, 10, 20}, {false, 9, 30, 40}}, true, 0},
		{"not known, but then two values", unknown, []op{{false, 9, 10, 20}, {false, 8, 30, 40}}, false, 0},
		// A failed write lands between its invoke and its bound, or never.
		{"a failed write read before its bound", known, []op{{true, 6, 10, 0}, {false, 6, 20, 30}, {true, 7, 60, 70}, {false, 7, 80, 90}}, true, 50},
		{"a failed write read only after its bound, overwritten since", known, []op{{true, 6, 10, 0}, {false, 5, 20, 30}, {true, 7, 60, 70}, {false, 6, 80, 90}}, false, 50},
		{"the same, open-ended", known, []op{{true, 6, 10, 0}, {false, 5, 20, 30}, {true, 7, 60, 70}, {false, 6, 80, 90}}, true, 0},
		{"a failed write landed before its bound, read after it", known, []op{{true, 6, 10, 0}, {false, 5, 20, 30}, {false, 6, 80, 90}}, true, 50},
		{"a failed write that never landed", known, []op{{true, 6, 10, 0}, {false, 5, 80, 90}}, true, 50},
		{"a failed write that never landed, then its value", known, []op{{true, 6, 10, 0}, {false, 5, 80, 90}, {false, 6, 100, 110}}, false, 50},
		{"an acknowledged write never lands", known, []op{{true, 6, 10, 20}, {false, 5, 80, 90}}, false, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory()
			for i, o := range tc.ops {
				if o.write {
					var err error
					if o.ret == 0 {
						err = errors.New("connection reset")
					}
					h.write(i, k, o.v, o.call, o.ret, err)
				} else {
					h.read(i, k, o.v, o.call, o.ret)
				}
			}
			if tc.failedBy != 0 {
				h.failedWritesEndAt(tc.failedBy)
			}
			dir := t.TempDir()
			res, err := h.check(tc.initial, dir, "h.html")
			if res.ops != len(tc.ops) || res.blocks != 1 {
				t.Errorf("checked %d operations on %d blocks, want %d on 1", res.ops, res.blocks, len(tc.ops))
			}
			if tc.ok {
				if err != nil {
					t.Fatalf("a register's history failed: %v", err)
				}
				return
			}
			if !errors.Is(err, errNotLinearizable) {
				t.Fatalf("check: %v, want %v", err, errNotLinearizable)
			}
			b, rerr := os.ReadFile(filepath.Join(dir, "h.html"))
			if rerr != nil || !strings.Contains(string(b), "<html") {
				t.Errorf("visualisation: %v, %d bytes", rerr, len(b))
			}
		})
	}
}

// TestHistoryOpenWrite: a write that failed is recorded with an open end,
// so any later read may find it.
func TestHistoryOpenWrite(t *testing.T) {
	h := newHistory()
	h.write(0, blockKey{rwVolume, 1}, 7, 10, 20, errors.New("timeout"))
	if r := h.ops[0].Return; r != math.MaxInt64 {
		t.Fatalf("a failed write returns at %d, want open-ended", r)
	}
}

// TestHistoryManyFailedWrites: a block with 40 writes that failed in a
// row, of which only the first landed, read before their bound, then an
// acknowledged write: its read passes within the check's budget, a read
// of one of the failed writes after it fails. Before, every failed write
// had to land and the search tried each subset of the 39 others before
// each read: it ran out of its budget.
func TestHistoryManyFailedWrites(t *testing.T) {
	k := blockKey{rwVolume, 3}
	known := func(blockKey) uint64 { return 5 }
	for _, tc := range []struct {
		last uint64 // the value the last read returns
		ok   bool
	}{{200, true}, {100, false}, {101, false}} {
		h := newHistory()
		call := int64(10)
		for v := range uint64(40) {
			h.write(int(v), k, 100+v, call, call+5, errors.New("EIO"))
			call += 10
		}
		for i := range 20 {
			h.read(40+i, k, 100, call, call+5)
			call += 10
		}
		h.failedWritesEndAt(call)
		h.write(60, k, 200, call+10, call+15, nil)
		h.read(61, k, tc.last, call+20, call+25)
		res, err := h.check(known, t.TempDir(), "h.html")
		switch {
		case tc.ok && err != nil:
			t.Errorf("read %d after the acknowledged write: %d operations: %v", tc.last, res.ops, err)
		case !tc.ok && !errors.Is(err, errNotLinearizable):
			t.Errorf("read %d after the bound and the acknowledged write: %v, want %v", tc.last, err, errNotLinearizable)
		}
	}
}

// TestHistorySavedWhenOutOfBudget: a check that runs out of its budget
// saves the history it checked as JSON, which loads back to the same
// operations and checks offline.
func TestHistorySavedWhenOutOfBudget(t *testing.T) {
	defer func(d time.Duration) { *checkTimeout = d }(*checkTimeout)
	*checkTimeout = time.Nanosecond
	h := syntheticHistory(1, 3000, 120, 1, 0)
	dir := t.TempDir()
	res, err := h.check(func(blockKey) uint64 { return 0 }, dir, "history-seed-7.html")
	if err == nil || errors.Is(err, errNotLinearizable) {
		t.Skipf("the check finished within 1ns (%v): nothing to save", err)
	}
	want := filepath.Join(dir, "history-seed-7.json.gz")
	if res.saved != want || !strings.Contains(err.Error(), want) {
		t.Fatalf("saved %q, error %v; want %s named", res.saved, err, want)
	}
	ops, lerr := loadHistory(want)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(ops) < res.ops {
		t.Fatalf("loaded %d operations, checked %d", len(ops), res.ops)
	}
	*checkTimeout = time.Minute
	if _, err := checkOps(ops, historyResult{ops: len(ops)}, dir, "offline.html"); err != nil {
		t.Fatalf("the saved history offline: %v", err)
	}
}

// TestCheckSavedHistory checks a history a round saved when its check
// ran out of budget (CAMPAIGN_HISTORY=path; CAMPAIGN_CHECK_TIMEOUT sets
// the budget).
func TestCheckSavedHistory(t *testing.T) {
	path := os.Getenv("CAMPAIGN_HISTORY")
	if path == "" {
		t.Skip("set CAMPAIGN_HISTORY to a saved history (history-seed-S.json.gz) to check it")
	}
	ops, err := loadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := checkOps(ops, historyResult{ops: len(ops)}, filepath.Dir(path), strings.TrimSuffix(filepath.Base(path), ".json.gz")+"-offline.html")
	t.Logf("%d operations on %d blocks checked in %v", res.ops, res.blocks, res.took)
	if err != nil {
		t.Fatal(err)
	}
}
