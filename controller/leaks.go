package controller

import "fmt"

// LeakedSlots compares every namespace's allocation count with the slots
// the snapshot's segment records and moves name (a move's reserved
// destination before its commit, the old slot after it) and describes
// each namespace where they differ: a slot allocated and named by nothing
// is leaked, one named but not allocated may be handed out twice.
func (s *Snapshot) LeakedSlots() []string {
	named := map[string]int64{}
	for _, segs := range s.Segments {
		for _, seg := range segs {
			for _, sl := range seg.Slots {
				named[sl.NS]++
			}
			if seg.Move != nil && seg.Move.From == nil {
				named[seg.Move.To.NS]++ // reserved destination
			} else if seg.Move != nil {
				named[seg.Move.From.NS]++ // committed: the old slot, still reserved
			}
		}
	}
	var out []string
	for _, n := range s.State.Namespaces {
		if n.Used != named[n.ID] {
			out = append(out, fmt.Sprintf("namespace %s: %d slots allocated, %d named by segments: %d leaked", n.ID, n.Used, named[n.ID], n.Used-named[n.ID]))
		}
	}
	return out
}
