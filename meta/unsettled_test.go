package meta

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestUnsettledRecords: an owner records, lists and clears a segment's
// unsettled blocks; VolumeInfo counts them and says what to do; bad
// blocks are refused and change nothing; freeing the segment and deleting
// the volume delete the records; a fenced owner writes nothing.
func TestUnsettledRecords(t *testing.T) {
	s := setup(t, 3, 1, 8)
	addVolume(t, s, "vol", 2, 1, 8)
	ctx := testCtx(t)
	o, err := s.Acquire(ctx, "vol", OwnerOptions{Holder: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := s.VolumeMap(ctx, "vol", o)
	if err != nil {
		t.Fatal(err)
	}
	a, b := [][3]int64{{0, 1, 2}, {3, 0, 0}, {3, 1, 0}}, [][3]int64{{7, 0, 1}}
	if err := vm.SetUnsettled(ctx, 2, a, false); err != nil {
		t.Fatal(err)
	}
	if err := vm.SetUnsettled(ctx, 5, b, true); err != nil {
		t.Fatal(err)
	}
	want := []UnsettledMark{{Segment: 2, Blocks: a}, {Segment: 5, Blocks: b, More: true}}
	if got, err := vm.Unsettled(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("unsettled: %v %v, want %v", got, err, want)
	}
	info, err := s.VolumeInfo(ctx, "vol")
	if err != nil {
		t.Fatal(err)
	}
	if info.Unsettled != (UnsettledCount{Blocks: 4, More: true}) {
		t.Errorf("volume info counts %+v, want 4 blocks and more", info.Unsettled)
	}
	if err := vm.SetUnsettled(ctx, 1, [][3]int64{{0, 0, 0}}, false); err != nil {
		t.Fatal(err)
	}
	counts, err := s.UnsettledCounts(ctx)
	if want := map[string]UnsettledCount{"vol": {Blocks: 5, More: true}}; err != nil || !reflect.DeepEqual(counts, want) {
		t.Errorf("unsettled counts %v (%v), want %v", counts, err, want)
	}
	if err := vm.SetUnsettled(ctx, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := WriteVolumeInfo(&out, info); err != nil || !strings.Contains(out.String(), "unsettled at least 5 blocks") ||
		!strings.Contains(out.String(), "nvstripe volume settle vol") {
		t.Errorf("volume info prints %q (%v), want the unsettled count and the settle command", out.String(), err)
	}
	for _, bad := range [][][3]int64{{{1, 0, 0}, {0, 0, 0}}, {{1, 0, 0}, {1, 0, 0}}, {{-1, 0, 0}}, make([][3]int64, MaxUnsettledBlocks+1)} {
		if err := vm.SetUnsettled(ctx, 2, bad, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("set unsettled %v: %v, want ErrInvalid", bad[:min(len(bad), 2)], err)
		}
	}
	if err := vm.SetUnsettled(ctx, 8, b, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("set unsettled past the last segment: %v, want ErrInvalid", err)
	}
	if got, _ := vm.Unsettled(ctx); !reflect.DeepEqual(got, want) {
		t.Fatalf("refused records changed them: %v, want %v", got, want)
	}
	if err := vm.SetUnsettled(ctx, 2, a[1:], false); err != nil {
		t.Fatal(err)
	}
	if err := vm.SetUnsettled(ctx, 5, nil, false); err != nil {
		t.Fatal(err)
	}
	want = []UnsettledMark{{Segment: 2, Blocks: a[1:]}}
	if got, err := vm.Unsettled(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after clearing: %v %v, want %v", got, err, want)
	}
	if info, err := s.VolumeInfo(ctx, "vol"); err != nil || info.Unsettled != (UnsettledCount{Blocks: 2}) {
		t.Errorf("volume info after clearing: %+v %v", info, err)
	}
	allocateFree(t, ctx, vm, 2)
	if got, _ := vm.Unsettled(ctx); len(got) != 0 {
		t.Fatalf("free kept the unsettled record: %v", got)
	}
	if err := vm.SetUnsettled(ctx, 3, a, false); err != nil {
		t.Fatal(err)
	}
	// A fenced owner: its lease revoked, another took the volume.
	revokeOwner(t, ctx, s, "vol", o)
	next, err := s.Acquire(ctx, "vol", OwnerOptions{Holder: "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.SetUnsettled(ctx, 3, nil, false); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("clear by the fenced owner: %v, want ErrLeaseLost", err)
	}
	if err := vm.SetUnsettled(ctx, 4, b, false); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("record by the fenced owner: %v, want ErrLeaseLost", err)
	}
	want = []UnsettledMark{{Segment: 3, Blocks: a}}
	if got, err := vm.Unsettled(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after the fenced owner's writes: %v %v, want %v", got, err, want)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVolume(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	if resp, err := rawClient(t).Get(ctx, s.keys.unsettleds("vol"), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("delete volume left %d unsettled records (%v)", resp.Count, err)
	}
}
