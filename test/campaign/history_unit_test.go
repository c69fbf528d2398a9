package campaign

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	}{
		{"read the starting value", known, []op{{false, 5, 10, 20}}, true},
		{"read a write's value after it returned", known, []op{{true, 6, 10, 20}, {false, 6, 30, 40}}, true},
		{"read the old value during the write", known, []op{{true, 6, 10, 40}, {false, 5, 20, 30}}, true},
		{"read the new value during the write", known, []op{{true, 6, 10, 40}, {false, 6, 20, 30}}, true},
		{"stale read after the write returned", known, []op{{true, 6, 10, 20}, {false, 5, 30, 40}}, false},
		{"new value, then the old one again", known, []op{{true, 6, 10, 100}, {false, 6, 20, 30}, {false, 5, 40, 50}}, false},
		{"a failed write that landed later", known, []op{{true, 6, 10, 0}, {false, 5, 20, 30}, {false, 6, 40, 50}}, true},
		{"a failed write read before it began", known, []op{{false, 6, 2, 5}, {true, 6, 10, 0}}, false},
		{"a value nobody wrote", known, []op{{false, 9, 10, 20}}, false},
		{"bad content", known, []op{{false, badValue, 10, 20}}, false},
		{"a block whose value is not known", unknown, []op{{false, 9, 10, 20}, {false, 9, 30, 40}}, true},
		{"not known, but then two values", unknown, []op{{false, 9, 10, 20}, {false, 8, 30, 40}}, false},
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
