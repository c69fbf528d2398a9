//go:build linux && !amd64 && !arm64

package blockdev

const sysPwritev2 = 0 // not wired up here: WriteAtFUA writes, then flushes
