package accept

import (
	"maps"
	"sync"
	"testing"
)

// TestCounts: concurrent Adds of the set's reasons are all counted, a
// reason outside the set is not, and a snapshot lists every reason of the
// set, zeroes included.
func TestCounts(t *testing.T) {
	c := NewCounts([]string{RefusedPerIP, RefusedHandshake, RefusedPending})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				c.Add(RefusedPerIP)
				c.Add(RefusedHandshake)
				c.Add("not a reason")
			}
		})
	}
	wg.Wait()
	want := map[string]uint64{RefusedPerIP: 400, RefusedHandshake: 400, RefusedPending: 0}
	if got := c.Snapshot(); !maps.Equal(got, want) {
		t.Fatalf("snapshot %v, want %v", got, want)
	}
}
