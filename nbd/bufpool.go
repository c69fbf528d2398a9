package nbd

import (
	"math/bits"
	"sync"
)

// Payload buffers come from size classes of powers of two from 4 KiB to
// 1 GiB, each a sync.Pool, so that steady-state IO allocates nothing.
const (
	minClassShift = 12
	maxClassShift = 30
)

// bufPool caches payload buffers by size class. Each Server has one, shared
// by its connections and exports.
type bufPool struct {
	classes [maxClassShift - minClassShift + 1]sync.Pool
}

// classOf returns the class index for n bytes.
func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// get returns a buffer of length n (contents unspecified).
func (p *bufPool) get(n int) *[]byte {
	c := classOf(n)
	if c >= len(p.classes) {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(c+minClassShift))
	return &b
}

// put returns a buffer from get to its class.
func (p *bufPool) put(b *[]byte) {
	c := classOf(cap(*b))
	if c >= len(p.classes) || cap(*b) != 1<<(c+minClassShift) {
		return
	}
	p.classes[c].Put(b)
}
