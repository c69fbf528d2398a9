package blockdev

const sysPwritev2 = 328 // linux/amd64
