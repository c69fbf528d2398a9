//go:build mutant_stale_read

package agent

import (
	"bytes"
	"context"
	"sync"

	"github.com/nvstripe/nvstripe/blockdev"
)

// mutate wraps the served device in staleOnce: this build is a mutant for
// tests only (the fault campaign's history check must catch it).
func mutate(dev blockdev.Device) blockdev.Device {
	return &staleOnce{Device: dev, old: map[int64][]byte{}}
}

// staleOnce remembers, for every 4 KiB block written, what it held
// before its last write, and answers the first read of a block whose
// remembered content differs from its current one with the remembered
// content: one stale read, after which it serves right data.
type staleOnce struct {
	blockdev.Device

	mu     sync.Mutex
	old    map[int64][]byte
	served bool
}

const staleBlock = 4096

func (d *staleOnce) done() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.served
}

func (d *staleOnce) WriteAt(ctx context.Context, p []byte, off int64) error {
	if len(p) != staleBlock || off%staleBlock != 0 || d.done() {
		return d.Device.WriteAt(ctx, p, off)
	}
	prev := make([]byte, staleBlock)
	if err := d.Device.ReadAt(ctx, prev, off); err != nil {
		prev = nil
	}
	if err := d.Device.WriteAt(ctx, p, off); err != nil {
		return err
	}
	if prev != nil {
		d.mu.Lock()
		d.old[off] = prev
		d.mu.Unlock()
	}
	return nil
}

func (d *staleOnce) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := d.Device.ReadAt(ctx, p, off); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if prev, ok := d.old[off]; ok && !d.served && len(p) == staleBlock && !bytes.Equal(prev, p) {
		copy(p, prev)
		d.served, d.old = true, nil
	}
	return nil
}
