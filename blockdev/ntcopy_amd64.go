package blockdev

import "unsafe"

//go:noescape
func ntcopy64(dst, src *byte, n uintptr)

// copyCold is copy() for a destination that is not read again soon (the
// pages of a Mem, the device's "media"): the bulk goes with non-temporal
// stores, which write whole cache lines without first reading them from
// memory and without evicting the caller's working set. Go's memmove does
// this only from 1 MiB up; a volume writes its namespaces in chunk-sized
// pieces (128 KiB by default), which then cost a read-for-ownership of
// every destination line. Small copies go through copy().
func copyCold(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < coldCopyMin {
		return copy(dst, src)
	}
	head := int((16 - uintptr(unsafe.Pointer(&dst[0]))%16) % 16)
	copy(dst[:head], src)
	body := (n - head) &^ 63
	ntcopy64(&dst[head], &src[head], uintptr(body))
	copy(dst[head+body:n], src[head+body:n])
	return n
}
