package initiator

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// TestRoundTripQD32 runs 32 goroutines of random verified reads and writes
// over 4 I/O queues, with every digest combination.
func TestRoundTripQD32(t *testing.T) {
	for _, dg := range []struct{ hdr, data bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run("hdgst="+strconv.FormatBool(dg.hdr)+",ddgst="+strconv.FormatBool(dg.data), func(t *testing.T) {
			f := newFixture(t, 1, 32<<20, nil)
			o := f.options(t)
			o.IOQueues, o.HeaderDigest, o.DataDigest = 4, dg.hdr, dg.data
			d := open(t, o)
			if d.Size() != 32<<20 || d.BlockSize() != 4096 {
				t.Fatalf("geometry %d/%d", d.Size(), d.BlockSize())
			}
			if err := runWorkers(d, 32, 40, 40, nil); err != nil {
				t.Fatal(err)
			}
			c := d.paths[0].ctrl.Load()
			if len(c.ios) != 4 {
				t.Fatalf("%d I/O queues, want 4", len(c.ios))
			}
			// The data reached the namespace itself, not just a cache.
			want := make([]byte, 1<<20)
			got := make([]byte, 1<<20)
			if err := f.mem.ReadAt(context.Background(), want, 0); err != nil {
				t.Fatal(err)
			}
			if err := d.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("initiator and namespace disagree (err %v)", err)
			}
		})
	}
}

// TestSuccessFlag disables SQ flow control so the target completes reads
// with the C2HData SUCCESS flag instead of a response capsule.
func TestSuccessFlag(t *testing.T) {
	f := newFixture(t, 1, 8<<20, nil)
	o := f.options(t)
	o.IOQueues, o.DisableSQFlow = 2, true
	d := open(t, o)
	if err := runWorkers(d, 8, 40, 16, nil); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, q := range d.paths[0].ctrl.Load().ios {
		n += q.successes.Load()
	}
	if n == 0 {
		t.Fatal("no read completed through a C2HData SUCCESS flag")
	}
}

// TestInCapsuleAndR2T writes sizes on both sides of the controller's
// in-capsule limit and checks which went through R2T, with a small
// MAXH2CDATA so R2T data is split into several H2CData PDUs.
func TestInCapsuleAndR2T(t *testing.T) {
	f := newFixture(t, 1, 8<<20, func(c *target.Config) {
		c.InCapsuleDataSize = 8192
		c.MaxH2CData = 16 << 10
	})
	for _, dg := range []bool{false, true} {
		o := f.options(t)
		o.IOQueues, o.HeaderDigest, o.DataDigest = 1, dg, dg
		d := open(t, o)
		q := d.paths[0].ctrl.Load().ios[0]
		if d.paths[0].ctrl.Load().inCap != 8192 || q.maxH2C != 16<<10 {
			t.Fatalf("in-capsule %d, maxh2c %d; want 8192, 16384", d.paths[0].ctrl.Load().inCap, q.maxH2C)
		}
		for _, tc := range []struct {
			n   int
			r2t bool
		}{{4096, false}, {8192, false}, {12288, true}, {64 << 10, true}, {1 << 20, true}} {
			before, h2c := q.r2ts.Load(), q.h2cPDUs.Load()
			p := make([]byte, tc.n)
			stamp(p, 40960, uint64(tc.n))
			if err := d.WriteAt(context.Background(), p, 40960); err != nil {
				t.Fatal(err)
			}
			if got := q.r2ts.Load() > before; got != tc.r2t {
				t.Errorf("write of %d bytes: R2T used %t, want %t", tc.n, got, tc.r2t)
			}
			if want := uint64((tc.n + 16<<10 - 1) / (16 << 10)); tc.r2t && q.h2cPDUs.Load()-h2c != want {
				t.Errorf("write of %d bytes: %d H2CData PDUs, want %d", tc.n, q.h2cPDUs.Load()-h2c, want)
			}
			got := make([]byte, tc.n)
			if err := f.mem.ReadAt(context.Background(), got, 40960); err != nil || !bytes.Equal(got, p) {
				t.Fatalf("write of %d bytes did not land (err %v)", tc.n, err)
			}
		}
		d.Close()
	}
}

// TestConformance runs the blockdev conformance suite on the initiator.
func TestConformance(t *testing.T) {
	devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
		f := newFixture(t, 1, size, nil)
		o := f.options(t)
		o.IOQueues = 2
		return open(t, o)
	})
}

// TestStatusMapping checks that target statuses reach the caller with the
// right class, and that path statuses are retried instead.
func TestStatusMapping(t *testing.T) {
	f := newFixture(t, 1, 1<<20, nil)
	d := open(t, f.options(t))
	ctx := context.Background()
	p := make([]byte, 4096)
	cases := []struct {
		code  pdu.StatusCode
		dnr   bool
		class error // nil: retried, the read succeeds
	}{
		{pdu.SCLBAOutOfRange, true, blockdev.ErrOutOfRange},
		{pdu.SCInvalidField, true, blockdev.ErrInvalid},
		{pdu.SCReservationConflict, true, blockdev.ErrFenced},
		{pdu.SCUnrecoveredReadError, true, blockdev.ErrCorrupt},
		{pdu.SCInternalError, true, blockdev.ErrUnavailable},
		{pdu.SCNamespaceNotReady, false, nil},
		{pdu.SCANAInaccessible, false, nil},
		{pdu.SCANATransition, false, nil},
	}
	for _, c := range cases {
		f.tgt.Faults().FailIO(target.IOFault{Op: target.FaultRead, Status: c.code, DNR: c.dnr, Count: 2})
		err := d.ReadAt(ctx, p, 0)
		f.tgt.Faults().Clear()
		if c.class == nil {
			if err != nil {
				t.Errorf("status %v: %v, want a successful retry", c.code, err)
			}
			continue
		}
		var se *StatusError
		if !errors.Is(err, c.class) || !errors.As(err, &se) || se.Status != c.code {
			t.Errorf("status %v: err %v (class %v), want class %v", c.code, err, blockdev.Class(err), c.class)
		}
	}
}

// TestDiscover reads the discovery log through the target's discovery
// controller.
func TestDiscover(t *testing.T) {
	f := newFixture(t, 2, 1<<20, nil)
	ents, err := Discover(context.Background(), f.addrs[0], DiscoverOptions{HostNQN: testHost})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(f.addrs[0])
	var found bool
	for _, e := range ents {
		if e.SubNQN == testNQN && e.TrSvcID == port && e.TrType == pdu.TrTypeTCP {
			found = true
		}
	}
	if !found {
		t.Fatalf("discovery log %+v lacks %s on port %s", ents, testNQN, port)
	}
	if _, err := Discover(context.Background(), "127.0.0.1:1", DiscoverOptions{Timeout: time.Second}); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("discover on a closed port: %v", err)
	}
}

// TestHostNotAllowed checks that a refused Connect is a clear error.
func TestHostNotAllowed(t *testing.T) {
	f := newFixture(t, 1, 1<<20, nil)
	o := f.options(t)
	o.HostNQN = "nqn.2024-01.io.nvstripe:stranger"
	_, err := Open(context.Background(), o)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != pdu.SCConnectInvalidHost || !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("Open with a foreign host NQN: %v", err)
	}
}
