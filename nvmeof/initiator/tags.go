package initiator

import (
	"context"
	"errors"
)

// maxQueueDepth bounds QueueDepth: tags use the low 12 bits of a CID.
const maxQueueDepth = 1024

// tagBits is how many low CID bits hold the tag; the top 4 bits hold a
// generation that changes each time a tag is reused, so a stale completion
// for an older use of the same tag is recognised (as the Linux host does).
const tagBits = 12

// errQueueClosed is returned by tagPool.get once the pool is closed.
var errQueueClosed = errors.New("queue closed")

// tagPool hands out command tags 0..n-1. It is a buffered channel of free
// tags: get blocks while all are in use.
//
// Invariants: every tag is either in free or held by exactly one caller;
// put of a tag not held is a bug.
type tagPool struct {
	free   chan uint16
	gen    []uint8 // per tag, advanced on every get; touched only by the holder
	closed <-chan struct{}
}

func newTagPool(n int, closed <-chan struct{}) *tagPool {
	p := &tagPool{free: make(chan uint16, n), gen: make([]uint8, n), closed: closed}
	for i := 0; i < n; i++ {
		p.free <- uint16(i)
	}
	return p
}

// get returns a free tag and the CID to use with it, waiting for one while
// ctx allows and the pool is open.
func (p *tagPool) get(ctx context.Context) (tag, cid uint16, err error) {
	select {
	case tag = <-p.free:
	default:
		select {
		case tag = <-p.free:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-p.closed:
			return 0, 0, errQueueClosed
		}
	}
	p.gen[tag] = (p.gen[tag] + 1) & 0xF
	return tag, cidOf(tag, p.gen[tag]), nil
}

// put returns a tag obtained from get.
func (p *tagPool) put(tag uint16) { p.free <- tag }

func cidOf(tag uint16, gen uint8) uint16 { return uint16(gen)<<tagBits | tag }

func tagOf(cid uint16) uint16 { return cid & (1<<tagBits - 1) }
