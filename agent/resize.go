package agent

import (
	"context"
	"time"

	"github.com/nvstripe/nvstripe/volclient"
)

// sizeCheckEvery is how often a mapping reads its volume's record to notice
// that the volume was grown (nvstripe volume resize).
const sizeCheckEvery = 2 * time.Second

// checkSize grows the served volume when its record says it is larger, and
// tells the frontend once the volume has a size it was not told yet (also
// after a reopen, whose volume starts at the record's size). Failures are
// logged and tried again at the next check.
func (mp *mapping) checkSize(m *volclient.Mapped) {
	ctx, cancel := context.WithTimeout(context.Background(), sizeCheckEvery)
	defer cancel()
	rec, err := mp.a.o.Store.Volume(ctx, mp.name)
	if err != nil {
		return // etcd unreachable: the lease watch handles that
	}
	if rec.Size > m.Volume.Size() {
		m.Map.Grow(rec.Size) // first: IO may reach the new end once the volume grows
		if err := m.Volume.Grow(rec.Size); err != nil {
			mp.a.logf("%s: growing to %d bytes: %v", mp.name, rec.Size, err)
			return
		}
	}
	size := m.Volume.Size()
	mp.mu.Lock()
	front, told, dev := mp.front, mp.frontSize, mp.dev
	mp.mu.Unlock()
	if front == nil || size <= told {
		return
	}
	dev.slot.Resize(size)
	if err := front.resize(size); err != nil {
		mp.a.logf("%s grew from %d to %d bytes, but: %v", mp.name, told, size, err)
	} else {
		mp.a.logf("%s grew from %d to %d bytes: %s has the new size", mp.name, told, size, front.url())
	}
	mp.mu.Lock()
	mp.frontSize = size // told, or refused for good (ublk): not again
	mp.mu.Unlock()
}
