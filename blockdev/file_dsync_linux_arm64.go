package blockdev

const sysPwritev2 = 287 // linux/arm64 (asm-generic)
