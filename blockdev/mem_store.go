package blockdev

import (
	"sync"
	"sync/atomic"
)

// memPageSize is the allocation unit of a Mem: a page is allocated on its
// first write and released when a Trim or WriteZeroes covers it whole.
const memPageSize = 1 << 20

// memSpanSize is the unit of byte locking inside a page: IO on disjoint spans
// of one page runs in parallel, as it does on a namespace. A volume puts
// neighbouring stripes' chunks in one page, so a lock per page would
// serialise the writes of a sequential stream.
const memSpanSize = 64 << 10

// memPage is one page of a pageStore.
type memPage struct {
	// mu guards data itself: IO holds it shared, and allocating or releasing
	// the page holds it exclusively.
	mu sync.RWMutex
	// data is nil while the page reads as zeros, else len(data) is the
	// page's length. REQUIRES: mu held.
	data []byte
	// spans guard the bytes of data, memSpanSize each: reads hold them
	// shared, writes exclusively, always taken in ascending order.
	spans [memPageSize / memSpanSize]sync.RWMutex
}

// lockSpans locks the spans covering [po, po+l), shared or exclusive.
func (pg *memPage) lockSpans(po, l int, exclusive bool) {
	for i := po / memSpanSize; i <= (po+l-1)/memSpanSize; i++ {
		if exclusive {
			pg.spans[i].Lock()
		} else {
			pg.spans[i].RLock()
		}
	}
}

func (pg *memPage) unlockSpans(po, l int, exclusive bool) {
	for i := po / memSpanSize; i <= (po+l-1)/memSpanSize; i++ {
		if exclusive {
			pg.spans[i].Unlock()
		} else {
			pg.spans[i].RUnlock()
		}
	}
}

// holdAllocated returns with pg.mu held shared and pg.data allocated (n
// bytes).
func (pg *memPage) holdAllocated(n int) {
	pg.mu.RLock()
	for pg.data == nil {
		pg.mu.RUnlock()
		pg.mu.Lock()
		if pg.data == nil {
			pg.data = make([]byte, n)
		}
		pg.mu.Unlock()
		pg.mu.RLock() // a release may come between: check again
	}
}

// pageStore is a sparse byte array in pages. IO locks only the spans of a
// page that it touches, so IO on disjoint ranges runs in parallel and
// overlapping IO is serialised. A nil page pointer and a page with nil data
// both read as zeros.
//
// Invariants:
//  1. len(pages) == ceil(size / memPageSize).
//  2. An allocated page i holds exactly pageLen(i) bytes.
type pageStore struct {
	size  int64
	pages []atomic.Pointer[memPage]
}

func newPageStore(size int64) *pageStore {
	n := (size + memPageSize - 1) / memPageSize
	return &pageStore{size: size, pages: make([]atomic.Pointer[memPage], n)}
}

// pageLen is the length of page i: memPageSize except for a short last page.
func (s *pageStore) pageLen(i int) int {
	return int(min(memPageSize, s.size-int64(i)*memPageSize))
}

// span calls fn for each page piece of [off, off+n): page index, offset in the
// page, offset from off, and length.
func (s *pageStore) span(off, n int64, fn func(pi, po int, bo int64, l int)) {
	for bo := int64(0); bo < n; {
		at := off + bo
		pi := int(at / memPageSize)
		po := int(at % memPageSize)
		l := int(min(int64(memPageSize-po), n-bo))
		fn(pi, po, bo, l)
		bo += int64(l)
	}
}

// page returns page i, creating its (empty) header when missing.
func (s *pageStore) page(i int) *memPage {
	if p := s.pages[i].Load(); p != nil {
		return p
	}
	s.pages[i].CompareAndSwap(nil, &memPage{})
	return s.pages[i].Load()
}

func (s *pageStore) read(p []byte, off int64) {
	s.span(off, int64(len(p)), func(pi, po int, bo int64, l int) {
		dst := p[bo : bo+int64(l)]
		pg := s.pages[pi].Load()
		if pg == nil {
			clear(dst)
			return
		}
		pg.mu.RLock()
		if pg.data == nil {
			clear(dst)
		} else {
			pg.lockSpans(po, l, false)
			copy(dst, pg.data[po:po+l])
			pg.unlockSpans(po, l, false)
		}
		pg.mu.RUnlock()
	})
}

func (s *pageStore) write(p []byte, off int64) {
	s.span(off, int64(len(p)), func(pi, po int, bo int64, l int) {
		pg := s.page(pi)
		pg.holdAllocated(s.pageLen(pi))
		pg.lockSpans(po, l, true)
		copyCold(pg.data[po:po+l], p[bo:])
		pg.unlockSpans(po, l, true)
		pg.mu.RUnlock()
	})
}

// zero makes [off, off+n) read as zeros, releasing pages covered whole.
func (s *pageStore) zero(off, n int64) {
	s.span(off, n, func(pi, po int, _ int64, l int) {
		pg := s.pages[pi].Load()
		if pg == nil {
			return
		}
		if l == s.pageLen(pi) {
			pg.mu.Lock()
			pg.data = nil
			pg.mu.Unlock()
			return
		}
		pg.mu.RLock()
		if pg.data != nil {
			pg.lockSpans(po, l, true)
			clear(pg.data[po : po+l])
			pg.unlockSpans(po, l, true)
		}
		pg.mu.RUnlock()
	})
}

// allocated returns the allocated pages inside [off, off+n) as extents
// clipped to the range, merged when adjacent.
func (s *pageStore) allocated(off, n int64) []Extent {
	var ext []Extent
	s.span(off, n, func(pi, _ int, bo int64, l int) {
		pg := s.pages[pi].Load()
		if pg == nil {
			return
		}
		pg.mu.RLock()
		has := pg.data != nil
		pg.mu.RUnlock()
		if !has {
			return
		}
		at := off + bo
		if k := len(ext) - 1; k >= 0 && ext[k].Off+ext[k].Len == at {
			ext[k].Len += int64(l)
			return
		}
		ext = append(ext, Extent{Off: at, Len: int64(l)})
	})
	return ext
}

// clone returns a deep copy of s.
func (s *pageStore) clone() *pageStore {
	c := newPageStore(s.size)
	for i := range s.pages {
		pg := s.pages[i].Load()
		if pg == nil {
			continue
		}
		pg.mu.RLock()
		if n := len(pg.data); n > 0 {
			pg.lockSpans(0, n, false)
			c.pages[i].Store(&memPage{data: append([]byte(nil), pg.data...)})
			pg.unlockSpans(0, n, false)
		}
		pg.mu.RUnlock()
	}
	return c
}

// release drops every page; IO already holding a page finishes on it.
func (s *pageStore) release() {
	for i := range s.pages {
		s.pages[i].Store(nil)
	}
}
