package crc32c

import "golang.org/x/sys/cpu"

// fast: the CPU has the instructions updateAVX512 uses and the OS saves
// the AVX-512 registers (cpu.X86.HasAVX512F checks both).
var fast = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasAVX2 && cpu.X86.HasSSE42

// foldBlock is the number of bytes updateAVX512 folds per round.
const foldBlock = 256

// keys are the folding constants: for a fold over d bits, x^(d+31) mod P
// (multiplies the low quadword of a 128-bit lane) and x^(d-33) mod P (the
// high one), each bit-reflected. Rows: d = 2048 (the loop, 256 bytes on),
// 1536, 1024 and 512 (the four registers onto the last), then 384, 256,
// 128 and none, by lane, onto the last lane. TestKeys derives them.
var keys = [16]uint64{
	0xdcb17aa4, 0xb9e02b86,
	0xa87ab8a8, 0xab7aff2a,
	0x6992cea2, 0x0d3b6092,
	0x740eef02, 0x9e4addf8,
	0x1c291d04, 0xddc0152b,
	0x3da6d0cb, 0xba4fc28e,
	0xf20c0dfe, 0x493c7d27,
	0, 0,
}

// updateAVX512 returns the CRC state (not inverted) after n bytes at p,
// n a positive multiple of foldBlock, from state crc.
//
//go:noescape
func updateAVX512(crc uint32, p *byte, n int, k *[16]uint64) uint32

func updateFast(crc uint32, p []byte) (uint32, []byte) {
	n := len(p) &^ (foldBlock - 1)
	if !fast || n == 0 {
		return crc, p
	}
	return ^updateAVX512(^crc, &p[0], n, &keys), p[n:]
}
