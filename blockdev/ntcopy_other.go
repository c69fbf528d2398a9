//go:build !amd64

package blockdev

// copyCold is copy(); amd64 has a version with non-temporal stores.
func copyCold(dst, src []byte) int { return copy(dst, src) }
