package testutil

import "unsafe"

// AlignedBuf returns an n-byte buffer whose first byte is aligned to 4096,
// as O_DIRECT IO on a block device wants.
func AlignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	skip := (4096 - int(uintptr(unsafe.Pointer(&b[0]))%4096)) % 4096
	return b[skip : skip+n : skip+n]
}
