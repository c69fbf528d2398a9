//go:build !amd64

package crc32c

const fast = false

func updateFast(crc uint32, p []byte) (uint32, []byte) { return crc, p }
