package volume

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrNoSpace is returned when a segment cannot be placed.
var ErrNoSpace = errors.New("no space: not enough namespaces with free slots")

// MemAllocator is an in-memory Allocator over a fixed set of namespaces. It
// places each segment on the Width namespaces with the most free slots (ties
// by name), so it is deterministic. It is safe for concurrent use.
type MemAllocator struct {
	mu    sync.Mutex
	width int
	free  map[string][]int64 // free slot indexes per namespace, ascending
	segs  map[int64][]SlotRef
}

var _ Allocator = (*MemAllocator)(nil)

// NewMemAllocator returns an allocator placing width (K+M) slots per segment
// over namespaces, each holding slots[ns] slots.
func NewMemAllocator(width int, slots map[string]int64) *MemAllocator {
	a := &MemAllocator{width: width, free: map[string][]int64{}, segs: map[int64][]SlotRef{}}
	for ns, n := range slots {
		for i := int64(0); i < n; i++ {
			a.free[ns] = append(a.free[ns], i)
		}
	}
	return a
}

func (a *MemAllocator) Lookup(_ context.Context, seg int64) ([]SlotRef, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.segs[seg]
	return append([]SlotRef(nil), s...), ok, nil
}

func (a *MemAllocator) Allocate(_ context.Context, seg int64) ([]SlotRef, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.segs[seg]; ok {
		return append([]SlotRef(nil), s...), nil
	}
	names := make([]string, 0, len(a.free))
	for ns, f := range a.free {
		if len(f) > 0 {
			names = append(names, ns)
		}
	}
	if len(names) < a.width {
		return nil, fmt.Errorf("segment %d: %d namespaces have free slots, %d needed: %w", seg, len(names), a.width, ErrNoSpace)
	}
	sort.Slice(names, func(i, j int) bool {
		fi, fj := len(a.free[names[i]]), len(a.free[names[j]])
		return fi > fj || fi == fj && names[i] < names[j]
	})
	slots := make([]SlotRef, a.width)
	for i, ns := range names[:a.width] {
		slots[i] = SlotRef{NS: ns, Slot: a.free[ns][0]}
		a.free[ns] = a.free[ns][1:]
	}
	a.segs[seg] = slots
	return append([]SlotRef(nil), slots...), nil
}

func (a *MemAllocator) Free(_ context.Context, seg int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.segs[seg] {
		f := append(a.free[r.NS], r.Slot)
		sort.Slice(f, func(i, j int) bool { return f[i] < f[j] })
		a.free[r.NS] = f
	}
	delete(a.segs, seg)
	return nil
}

// Reserve takes a free slot out of the free list, as the destination of a
// move.
func (a *MemAllocator) Reserve(ref SlotRef) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.free[ref.NS]
	j := sort.Search(len(f), func(i int) bool { return f[i] >= ref.Slot })
	if j == len(f) || f[j] != ref.Slot {
		return fmt.Errorf("slot %s/%d is not free", ref.NS, ref.Slot)
	}
	a.free[ref.NS] = append(f[:j:j], f[j+1:]...)
	return nil
}

// Replace is the commit step of a move: slot idx of segment seg becomes to
// (reserved before). The old slot stays reserved until Release.
func (a *MemAllocator) Replace(_ context.Context, seg int64, idx int, to SlotRef) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.segs[seg]
	if !ok {
		return fmt.Errorf("segment %d not allocated", seg)
	}
	s[idx] = to
	return nil
}

// Release returns a reserved slot to the free list.
func (a *MemAllocator) Release(ref SlotRef) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := append(a.free[ref.NS], ref.Slot)
	sort.Slice(f, func(i, j int) bool { return f[i] < f[j] })
	a.free[ref.NS] = f
}

// FreeSlots returns the number of free slots of a namespace.
func (a *MemAllocator) FreeSlots(ns string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.free[ns])
}

// Allocated returns the number of allocated segments.
func (a *MemAllocator) Allocated() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.segs)
}
