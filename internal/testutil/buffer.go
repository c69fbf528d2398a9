package testutil

import (
	"bytes"
	"fmt"
	"sync"
)

// Buffer is a bytes.Buffer that a command, process or goroutine may write
// while the test reads it. The zero value is an empty buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// Logf appends one line formatted as by fmt.Sprintf: the Buffer as the
// log function of a component under test.
func (b *Buffer) Logf(format string, args ...any) {
	fmt.Fprintf(b, format+"\n", args...)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
