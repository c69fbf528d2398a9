package testutil

// Pattern returns n bytes of test data that differ with seed and from one
// 512-byte block to the next, so that data written to the wrong place or
// from another write does not compare equal.
func Pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed ^ byte(i>>9)
	}
	return b
}
