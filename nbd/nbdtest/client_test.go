package nbdtest_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// serve serves dev as export "e" (read-only when ro) on 127.0.0.1 until the
// test ends and returns the address.
func serve(t *testing.T, dev blockdev.Device, ro bool) (string, *nbd.Server) {
	t.Helper()
	srv, err := nbd.NewServer(nbd.Options{Exports: map[string]nbd.Export{"e": {Device: dev, ReadOnly: ro}}})
	if err != nil {
		t.Fatal(err)
	}
	return testutil.ServeListener(t, srv.Serve), srv
}

func dial(t *testing.T, addr, export string) *nbdtest.Client {
	t.Helper()
	c, err := nbdtest.Dial(t.Context(), "tcp", addr, export)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newMem(t *testing.T, size int64) *blockdev.Mem {
	t.Helper()
	m, err := blockdev.NewMem(size, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConformance runs the blockdev conformance suite on a Client talking
// to the nbd server over blockdev.Mem: every call goes over the wire.
func TestConformance(t *testing.T) {
	devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
		addr, _ := serve(t, newMem(t, size), false)
		c := dial(t, addr, "e")
		if c.Size() != size || c.BlockSize() != 512 {
			t.Fatalf("export of %d bytes, block %d; want %d, the advertised minimum 512", c.Size(), c.BlockSize(), size)
		}
		return c
	})
}

// gate is a device whose reads wait until want reads are in progress at
// once: it only lets reads through when the client pipelines them.
type gate struct {
	blockdev.Device
	want int
	mu   sync.Mutex
	in   int
	open chan struct{}
}

func (g *gate) ReadAt(ctx context.Context, p []byte, off int64) error {
	g.mu.Lock()
	g.in++
	if g.in == g.want {
		close(g.open)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Device.ReadAt(ctx, p, off)
}

// TestRequestsInFlight issues reads from several goroutines on one Client
// against a device that answers none of them until all are in progress on
// the server: they complete only if the client keeps them in flight
// together, and each gets its own data back (replies matched by cookie).
func TestRequestsInFlight(t *testing.T) {
	const n = 6
	mem := newMem(t, 1<<20)
	for i := range n {
		mem.WriteAt(context.Background(), bytes.Repeat([]byte{byte(i + 1)}, 4096), int64(i)*4096)
	}
	addr, _ := serve(t, &gate{Device: mem, want: n, open: make(chan struct{})}, false)
	c := dial(t, addr, "e")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang guard only
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			buf := make([]byte, 4096)
			errs[i] = c.ReadAt(ctx, buf, int64(i)*4096)
			if errs[i] == nil && !bytes.Equal(buf, bytes.Repeat([]byte{byte(i + 1)}, 4096)) {
				errs[i] = errors.New("wrong data")
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("read %d: %v", i, err)
		}
	}
}

// TestErrors checks the error classes: a refused export, a write to a
// read-only export, calls after the server went away and after Close.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	addr, srv := serve(t, newMem(t, 1<<20), true)
	if c, err := nbdtest.Dial(ctx, "tcp", addr, "nope"); err == nil || !errors.Is(err, blockdev.ErrUnavailable) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial of an unknown export: %v", err)
	}
	c := dial(t, addr, "e")
	var nerr *nbdtest.Error
	if err := c.WriteAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrFenced) || !errors.As(err, &nerr) {
		t.Fatalf("write to a read-only export: %v", err)
	}
	if err := c.ReadAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatalf("read after a refused write: %v", err)
	}
	srv.Close()
	if err := c.ReadAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("read after the server closed: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := c.Flush(ctx); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("flush after close: %v", err)
	}
}
