package crc32c

import (
	"hash/crc32"
	"math/rand"
	"testing"
)

// TestUpdate compares Update with hash/crc32 over every length up to 2 KiB
// and larger ones around the fold block, at several alignments and initial
// values, and chained in two pieces cut anywhere.
func TestUpdate(t *testing.T) {
	if !Fast() {
		t.Log("this CPU lacks AVX-512 VPCLMULQDQ: only the hash/crc32 path is checked")
	}
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, 70<<10)
	rng.Read(buf)
	var lengths []int
	for n := 0; n <= 2048; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range []int{4095, 4096, 4097, 4096 + 255, 64 << 10, 64<<10 + 3} {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, align := range []int{0, 1, 7} {
			p := buf[align : align+n]
			for _, init := range []uint32{0, 0xffffffff, rng.Uint32()} {
				if got, want := Update(init, p), crc32.Update(init, table, p); got != want {
					t.Fatalf("len %d align %d init %#x: %#x, hash/crc32 %#x", n, align, init, got, want)
				}
			}
		}
	}
	for i := 0; i < 200; i++ {
		n := rng.Intn(len(buf))
		cut := rng.Intn(n + 1)
		if got, want := Update(Checksum(buf[:cut]), buf[cut:n]), crc32.Checksum(buf[:n], table); got != want {
			t.Fatalf("len %d cut at %d: %#x, hash/crc32 %#x", n, cut, got, want)
		}
	}
}

// TestFlips: every single bit flip in a 4 KiB block changes its checksum
// (the fold keeps every bit's weight).
func TestFlips(t *testing.T) {
	p := make([]byte, 4096)
	rand.New(rand.NewSource(2)).Read(p)
	want := Checksum(p)
	for bit := 0; bit < len(p)*8; bit++ {
		p[bit/8] ^= 1 << (bit % 8)
		if Checksum(p) == want {
			t.Fatalf("flipping bit %d left the checksum %#x", bit, want)
		}
		p[bit/8] ^= 1 << (bit % 8)
	}
}

// BenchmarkChecksum: a 128 KiB chunk (the volume's default) checksummed
// whole and in 4 KiB blocks (the volume's checksum unit),
// by this package and by hash/crc32.
func BenchmarkChecksum(b *testing.B) {
	p := make([]byte, 128<<10)
	sums := make([]uint32, len(p)/4096)
	hashCRC := func(p []byte) uint32 { return crc32.Checksum(p, table) }
	cases := []struct {
		name string
		run  func()
	}{
		{"whole", func() { Checksum(p) }},
		{"whole/hash-crc32", func() { hashCRC(p) }},
		{"4KiB", func() {
			for i := range sums {
				sums[i] = Checksum(p[i*4096 : (i+1)*4096])
			}
		}},
		{"4KiB/hash-crc32", func() {
			for i := range sums {
				sums[i] = hashCRC(p[i*4096 : (i+1)*4096])
			}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				c.run()
			}
		})
	}
}
