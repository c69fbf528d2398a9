#include "textflag.h"

// func updateAVX512(crc uint32, p *byte, n int, k *[16]uint64) uint32
//
// Four ZMM registers hold 256 bytes as sixteen 128-bit lanes. Each round
// folds every lane forward 256 bytes (a carry-less multiply of its low and
// high quadwords by x^(d+31) and x^(d-33) mod P) onto the next 256 bytes.
// At the end the registers fold onto the last one, its lanes onto its last
// lane, and two CRC32Q instructions reduce those 128 bits to the CRC.
TEXT ·updateAVX512(SB), NOSPLIT, $0-36
	MOVL	crc+0(FP), AX
	MOVQ	p+8(FP), SI
	MOVQ	n+16(FP), CX
	MOVQ	k+24(FP), DX

	VMOVDQU64	0(SI), Z0
	VMOVDQU64	64(SI), Z1
	VMOVDQU64	128(SI), Z2
	VMOVDQU64	192(SI), Z3
	VMOVD	AX, X4 // the state joins the first 32 bits
	VPXORQ	Z4, Z0, Z0
	VBROADCASTI32X4	0(DX), Z10
	ADDQ	$256, SI
	SUBQ	$256, CX
	JZ	reduce

loop:
	VPCLMULQDQ	$0x00, Z10, Z0, Z4
	VPCLMULQDQ	$0x11, Z10, Z0, Z0
	VPTERNLOGD	$0x96, 0(SI), Z4, Z0
	VPCLMULQDQ	$0x00, Z10, Z1, Z5
	VPCLMULQDQ	$0x11, Z10, Z1, Z1
	VPTERNLOGD	$0x96, 64(SI), Z5, Z1
	VPCLMULQDQ	$0x00, Z10, Z2, Z6
	VPCLMULQDQ	$0x11, Z10, Z2, Z2
	VPTERNLOGD	$0x96, 128(SI), Z6, Z2
	VPCLMULQDQ	$0x00, Z10, Z3, Z7
	VPCLMULQDQ	$0x11, Z10, Z3, Z3
	VPTERNLOGD	$0x96, 192(SI), Z7, Z3
	ADDQ	$256, SI
	SUBQ	$256, CX
	JNZ	loop

reduce:
	VBROADCASTI32X4	16(DX), Z10
	VBROADCASTI32X4	32(DX), Z11
	VBROADCASTI32X4	48(DX), Z12
	VPCLMULQDQ	$0x00, Z10, Z0, Z4
	VPCLMULQDQ	$0x11, Z10, Z0, Z5
	VPCLMULQDQ	$0x00, Z11, Z1, Z6
	VPCLMULQDQ	$0x11, Z11, Z1, Z7
	VPCLMULQDQ	$0x00, Z12, Z2, Z8
	VPCLMULQDQ	$0x11, Z12, Z2, Z9
	VPTERNLOGD	$0x96, Z4, Z5, Z3
	VPTERNLOGD	$0x96, Z6, Z7, Z8
	VPTERNLOGD	$0x96, Z8, Z9, Z3

	// Lanes 0-2 fold onto lane 3 (whose keys are zero, so its products are).
	VMOVDQU64	64(DX), Z13
	VPCLMULQDQ	$0x00, Z13, Z3, Z4
	VPCLMULQDQ	$0x11, Z13, Z3, Z5
	VEXTRACTI32X4	$3, Z3, X6
	VPTERNLOGD	$0x96, Z4, Z5, Z6
	VEXTRACTI64X4	$1, Z6, Y7
	VPXOR	Y7, Y6, Y6
	VEXTRACTI128	$1, Y6, X7
	VPXOR	X7, X6, X6

	VMOVQ	X6, R8
	VPEXTRQ	$1, X6, R9
	XORL	AX, AX
	CRC32Q	R8, AX
	CRC32Q	R9, AX
	VZEROUPPER
	MOVL	AX, ret+32(FP)
	RET
