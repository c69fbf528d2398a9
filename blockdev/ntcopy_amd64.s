#include "textflag.h"

// func ntcopy64(dst, src *byte, n uintptr)
// Copies n bytes (n a positive multiple of 64) from src to dst with
// non-temporal stores; dst must be 16-byte aligned. Ends with SFENCE so the
// stores are ordered before whatever the caller does next (an unlock).
TEXT ·ntcopy64(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
loop:
	MOVOU	0(SI), X0
	MOVOU	16(SI), X1
	MOVOU	32(SI), X2
	MOVOU	48(SI), X3
	MOVNTO	X0, 0(DI)
	MOVNTO	X1, 16(DI)
	MOVNTO	X2, 32(DI)
	MOVNTO	X3, 48(DI)
	ADDQ	$64, SI
	ADDQ	$64, DI
	SUBQ	$64, CX
	JNZ	loop
	SFENCE
	RET
