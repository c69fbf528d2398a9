package initiator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// TestWriteNoSpace: a namespace whose backing store is full (its device
// fails writes of a range with ErrNoSpace, as a sparse file on a full file
// system does) answers Capacity Exceeded with Do Not Retry; the initiator
// returns ErrNoSpace at once, without treating the path as failed, and the
// namespace keeps serving reads and the writes that fit. The target counts
// the write as failed for lack of space.
func TestWriteNoSpace(t *testing.T) {
	var fd *faultdev.Dev
	f := newFixture(t, 1, 4<<20, func(c *target.Config) {
		ns := &c.Subsystems[0].Namespaces[0]
		fd = faultdev.New(ns.Device, 1)
		ns.Device = fd
	})
	fd.Add(faultdev.Rule{Ops: faultdev.OpWrite, Off: 1 << 20, Len: 1 << 20,
		Err: blockdev.Mark(fmt.Errorf("pwrite: no space left on device"), blockdev.ErrNoSpace)})
	d := open(t, f.options(t))
	ctx := context.Background()
	want := bytes.Repeat([]byte{7}, 8192)
	if err := d.WriteAt(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	err := d.WriteAt(ctx, make([]byte, 4096), 1<<20)
	var se *StatusError
	if !errors.Is(err, blockdev.ErrNoSpace) || !errors.As(err, &se) || se.Status != pdu.SCCapacityExceeded || !se.DNR {
		t.Fatalf("write into the full range: %v (class %v), want Capacity Exceeded with DNR, class ErrNoSpace", err, blockdev.Class(err))
	}
	if st := f.tgt.Stats().Namespaces[0]; st.NoSpace != 1 || st.Errors != 1 {
		t.Fatalf("target stats %+v, want the one write counted as no space", st)
	}
	got := make([]byte, len(want))
	if err := d.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after the failed write: %v, equal %t", err, bytes.Equal(got, want))
	}
	if err := d.WriteAt(ctx, want[:4096], 4096); err != nil {
		t.Fatalf("a write that fits, after the failed one: %v", err)
	}
}
