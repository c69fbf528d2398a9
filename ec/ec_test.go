package ec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// testConfig is one point of the option matrix every test runs over (like
// reedsolomon's testOpts): vector kernels on and off, with and without
// reedsolomon's own goroutine split.
type testConfig struct {
	name string
	opts []Option
}

func testConfigs() []testConfig {
	return []testConfig{
		{"simd", []Option{WithSIMD(true)}},
		{"purego", []Option{WithSIMD(false)}},
		{"simd-concurrent", []Option{WithSIMD(true), WithConcurrency(true)}},
	}
}

// forEachConfig runs f as a subtest per option set.
func forEachConfig(t *testing.T, f func(t *testing.T, opts []Option)) {
	for _, cfg := range testConfigs() {
		t.Run(cfg.name, func(t *testing.T) { f(t, cfg.opts) })
	}
}

// fataler is the part of testing.TB and *rapid.T that mustNew needs.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustNew(t fataler, k, m int, opts ...Option) *Codec {
	t.Helper()
	c, err := New(k, m, opts...)
	if err != nil {
		t.Fatalf("New(%d, %d): %v", k, m, err)
	}
	return c
}

// randomStripe returns k+m shards of size bytes with random data shards and
// zero parity.
func randomStripe(rng *rand.ChaCha8, k, m, size int) [][]byte {
	shards := make([][]byte, k+m)
	for i := range shards {
		shards[i] = make([]byte, size)
		if i < k {
			fill(rng, shards[i])
		}
	}
	return shards
}

// encodedStripe is randomStripe with its parity encoded by c.
func encodedStripe(t fataler, c *Codec, rng *rand.ChaCha8, size int) [][]byte {
	t.Helper()
	shards := randomStripe(rng, c.K(), c.M(), size)
	if err := c.Encode(shards); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return shards
}

// fill fills b with pseudo-random bytes from rng.
func fill(rng *rand.ChaCha8, b []byte) {
	_, _ = rng.Read(b)
}

// newRNG returns a seeded ChaCha8 stream (fast enough for megabytes under
// -race).
func newRNG(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return rand.NewChaCha8(s)
}

func cloneShards(s [][]byte) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = bytes.Clone(s[i])
	}
	return out
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		k, m    int
		errPart string // must appear in the message
	}{
		{0, 2, "k (data shards) = 0"},
		{-1, 0, "k (data shards) = -1"},
		{4, -1, "m (parity shards) = -1"},
		{255, 2, "257"},
		{257, 0, "k (data shards) = 257 exceeds 256"},
		{1, 256, "257"},
		{1, 300, "m (parity shards) = 300 exceeds 256"},
		{1 << 62, 1 << 62, "exceeds 256"},
	}
	for _, tt := range tests {
		forEachConfig(t, func(t *testing.T, opts []Option) {
			c, err := New(tt.k, tt.m, opts...)
			if c != nil || !errors.Is(err, ErrInvalidParams) {
				t.Fatalf("New(%d, %d) = %v, %v; want ErrInvalidParams", tt.k, tt.m, c, err)
			}
			if !strings.Contains(err.Error(), tt.errPart) {
				t.Errorf("New(%d, %d) error %q does not mention %q", tt.k, tt.m, err, tt.errPart)
			}
		})
	}
}

func TestNewValid(t *testing.T) {
	for _, g := range [][2]int{{1, 0}, {1, 1}, {4, 2}, {8, 3}, {16, 4}, {200, 56}, {1, 255}, {256, 0}} {
		c := mustNew(t, g[0], g[1])
		if c.K() != g[0] || c.M() != g[1] {
			t.Errorf("New(%d, %d): K, M = %d, %d", g[0], g[1], c.K(), c.M())
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		c := mustNew(t, 4, 2, opts...)
		tests := []struct {
			name   string
			shards [][]byte
			want   error
			shard  int // expected ShardError index, -1 for none
		}{
			{"too few", make([][]byte, 5), ErrShardCount, -1},
			{"too many", make([][]byte, 7), ErrShardCount, -1},
			{"all empty", make([][]byte, 6), ErrShardSize, 0},
			{"one short", [][]byte{make([]byte, 8), make([]byte, 8), make([]byte, 8), make([]byte, 7), make([]byte, 8), make([]byte, 8)}, ErrShardSize, 3},
			{"parity missing", [][]byte{make([]byte, 8), make([]byte, 8), make([]byte, 8), make([]byte, 8), make([]byte, 8), nil}, ErrShardSize, 5},
		}
		for _, tt := range tests {
			for op, f := range map[string]func([][]byte) error{
				"Encode": c.Encode,
				"Verify": func(s [][]byte) error { _, err := c.Verify(s); return err },
			} {
				err := f(tt.shards)
				if !errors.Is(err, tt.want) {
					t.Errorf("%s %s: err = %v, want %v", op, tt.name, err, tt.want)
				}
				var se *ShardError
				if got := errors.As(err, &se); got != (tt.shard >= 0) || got && se.Shard != tt.shard {
					t.Errorf("%s %s: err = %#v, want ShardError for shard %d", op, tt.name, err, tt.shard)
				}
			}
		}
	})
}

func TestReconstructErrors(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		c := mustNew(t, 4, 2, opts...)
		shards := encodedStripe(t, c, newRNG(1), 64)
		want := []bool{true, true, true, false, false, false}
		if err := c.ReconstructRange(shards[:5], want); !errors.Is(err, ErrShardCount) {
			t.Errorf("5 shards: err = %v, want ErrShardCount", err)
		}
		if err := c.ReconstructRange(shards, want[:4]); !errors.Is(err, ErrShardCount) {
			t.Errorf("4 want flags: err = %v, want ErrShardCount", err)
		}
		bad := cloneShards(shards)
		bad[0], bad[4] = nil, bad[4][:63]
		var se *ShardError
		if err := c.ReconstructRange(bad, want); !errors.Is(err, ErrShardSize) || !errors.As(err, &se) || se.Shard != 4 {
			t.Errorf("short shard 4: err = %v, want ShardError{4, ErrShardSize}", err)
		}
		three := cloneShards(shards)
		three[0], three[1], three[2] = nil, nil, nil
		err := c.ReconstructRange(three, want)
		if !errors.Is(err, ErrTooFewShards) || !strings.Contains(err.Error(), "3 of 6 shards present, need 4") {
			t.Errorf("3 present: err = %v, want ErrTooFewShards saying 3 of 6 present, need 4", err)
		}
		if three[0] != nil || three[1] != nil {
			t.Error("failed reconstruct modified shards")
		}
		// Nothing wanted is missing: a no-op, even with too few shards.
		if err := c.ReconstructRange(three, []bool{false, false, false, true, true, false}); err != nil {
			t.Errorf("nothing wanted missing: err = %v", err)
		}
	})
}

func TestPlainStriping(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		c := mustNew(t, 3, 0, opts...)
		shards := [][]byte{{1, 2}, {3, 4}, {5, 6}}
		orig := cloneShards(shards)
		if err := c.Encode(shards); err != nil {
			t.Fatal(err)
		}
		if ok, err := c.Verify(shards); !ok || err != nil {
			t.Errorf("Verify = %v, %v", ok, err)
		}
		if err := c.UpdateParity([][]byte{{1, 2}, nil, nil}, [][]byte{{9, 9}, nil, nil}, nil); err != nil {
			t.Errorf("UpdateParity: %v", err)
		}
		if !equalShards(shards, orig) {
			t.Error("m=0 operations modified data")
		}
		shards[1] = nil
		err := c.ReconstructRange(shards, []bool{false, true, false})
		if !errors.Is(err, ErrTooFewShards) {
			t.Errorf("ReconstructRange with m=0 and a missing shard: err = %v, want ErrTooFewShards", err)
		}
		if err := c.Encode(shards); !errors.Is(err, ErrShardSize) {
			t.Errorf("Encode with m=0 and an empty shard: err = %v, want ErrShardSize", err)
		}
	})
}

func equalShards(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestUpdateParityErrors(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		c := mustNew(t, 3, 2, opts...)
		b := func(n int) []byte { return make([]byte, n) }
		tests := []struct {
			name             string
			old, new, parity [][]byte
			want             error
			shard            int
		}{
			{"short old", [][]byte{b(8), nil}, [][]byte{b(8), nil, nil}, [][]byte{b(8), b(8)}, ErrShardCount, -1},
			{"long parity", [][]byte{b(8), nil, nil}, [][]byte{b(8), nil, nil}, [][]byte{b(8), b(8), b(8)}, ErrShardCount, -1},
			{"old without new", [][]byte{nil, b(8), nil}, [][]byte{nil, nil, nil}, [][]byte{b(8), b(8)}, ErrShardSize, 1},
			{"new size", [][]byte{nil, b(8), nil}, [][]byte{nil, b(9), nil}, [][]byte{b(8), b(8)}, ErrShardSize, 1},
			{"parity size", [][]byte{nil, b(8), nil}, [][]byte{nil, b(8), nil}, [][]byte{b(8), b(4)}, ErrShardSize, 4},
		}
		for _, tt := range tests {
			err := c.UpdateParity(tt.old, tt.new, tt.parity)
			if !errors.Is(err, tt.want) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
			}
			var se *ShardError
			if got := errors.As(err, &se); got != (tt.shard >= 0) || got && se.Shard != tt.shard {
				t.Errorf("%s: err = %v, want ShardError for shard %d", tt.name, err, tt.shard)
			}
		}
	})
}

// TestReconstructInPlace checks the buffer contract: a missing shard with
// enough capacity is rebuilt in its own backing array, one without gets a
// fresh slice, and present shards are not written.
func TestReconstructInPlace(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		c := mustNew(t, 4, 2, opts...)
		shards := encodedStripe(t, c, newRNG(3), 4096)
		work := cloneShards(shards)
		buf := make([]byte, 0, 8192)
		work[1], work[5] = buf, nil
		if err := c.ReconstructRange(work, []bool{false, true, false, false, false, true}); err != nil {
			t.Fatal(err)
		}
		if !equalShards(work, shards) {
			t.Fatal("reconstructed shards differ")
		}
		if &work[1][0] != &buf[:1][0] {
			t.Error("shard 1 was not rebuilt in the caller's buffer")
		}
		if len(work[5]) != 4096 {
			t.Errorf("shard 5 has %d bytes, want 4096", len(work[5]))
		}
	})
}

// TestConcurrentUse shares one codec between goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	forEachConfig(t, func(t *testing.T, opts []Option) {
		c := mustNew(t, 8, 3, opts...)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() { errs <- concurrentWorker(c, uint64(g)) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

func concurrentWorker(c *Codec, seed uint64) error {
	src := newRNG(seed)
	rng := rand.New(src)
	for range 10 {
		shards := randomStripe(src, c.K(), c.M(), 100+rng.IntN(2000))
		if err := c.Encode(shards); err != nil {
			return err
		}
		work := cloneShards(shards)
		want := make([]bool, len(work))
		for _, i := range rng.Perm(len(work))[:c.M()] {
			work[i], want[i] = nil, true
		}
		if err := c.ReconstructRange(work, want); err != nil {
			return err
		}
		if !equalShards(work, shards) {
			return errors.New("concurrent reconstruct mismatch")
		}
	}
	return nil
}

// TestLargeShardsSIMDMatchesPureGo compares the two kernels on shard sizes the
// volume uses (chunk 128 KiB, 1 MiB), plus an odd tail.
func TestLargeShardsSIMDMatchesPureGo(t *testing.T) {
	rng := newRNG(5)
	for _, size := range []int{128 << 10, 256<<10 + 77} {
		simd, pure := mustNew(t, 8, 3), mustNew(t, 8, 3, WithSIMD(false))
		a := randomStripe(rng, 8, 3, size)
		b := cloneShards(a)
		if err := simd.Encode(a); err != nil {
			t.Fatal(err)
		}
		if err := pure.Encode(b); err != nil {
			t.Fatal(err)
		}
		if !equalShards(a, b) {
			t.Fatalf("size %d: SIMD and pure-Go parity differ", size)
		}
	}
}
