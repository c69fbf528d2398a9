package testutil

import (
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrent: writers and a reader at once (the race detector
// watches) lose no write.
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Fatalf("got %d bytes, want 400", len(got))
	}
}
