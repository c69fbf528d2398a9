package meta

import (
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/placement"
)

// TestUnchanged: a create or resize guarded at revision R commits when
// nothing the guard covers changed since R, and is refused with
// ErrConflict, writing nothing, after each kind of change: the limit, a
// host, a namespace's state, a namespace removed, a namespace added, a
// volume created or resized. A taken name is still ErrExists.
func TestUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(context.Context, *Store) error
	}{
		{"limit", func(ctx context.Context, s *Store) error { _, err := s.SetMaxOvercommit(ctx, 3); return err }},
		{"host added", func(ctx context.Context, s *Store) error { _, err := s.AddHost(ctx, "h9", nil); return err }},
		{"namespace state", func(ctx context.Context, s *Store) error {
			return s.SetNamespaceState(ctx, "h0-n1", placement.StateDraining)
		}},
		{"namespace removed", func(ctx context.Context, s *Store) error { return s.RemoveNamespace(ctx, "h0-n1") }},
		{"namespace added", func(ctx context.Context, s *Store) error {
			_, err := s.AddNamespace(ctx, NamespaceSpec{Host: "h0", NQN: "nqn.2024-01.io.nvstripe:h0", NSID: 9,
				Size: 11 * testSlot, Paths: []PathRecord{{Addr: "tcp://127.0.0.1:4420"}}})
			return err
		}},
		{"volume created", func(ctx context.Context, s *Store) error {
			_, err := s.CreateVolume(ctx, VolumeSpec{Name: "other", Size: testSlot, Layout: Layout{K: 2, M: 1, Chunk: 4096}})
			return err
		}},
		{"volume resized", func(ctx context.Context, s *Store) error { _, err := s.ResizeVolume(ctx, "a", 4*testSlot); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			s := setup(t, 4, 1, 10)
			addVolume(t, s, "a", 2, 1, 1)
			u := guardNow(t, s)
			if err := tc.change(ctx, s); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateVolumeIf(ctx, VolumeSpec{Name: "b", Size: testSlot, Layout: Layout{K: 2, M: 1, Chunk: 4096}}, u); !errors.Is(err, ErrConflict) {
				t.Fatalf("create after the change: %v, want ErrConflict", err)
			}
			if _, err := s.Volume(ctx, "b"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("refused create recorded b: %v", err)
			}
			before, err := s.Volume(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.ResizeVolumeIf(ctx, "a", 8*testSlot, u); !errors.Is(err, ErrConflict) {
				t.Fatalf("resize after the change: %v, want ErrConflict", err)
			}
			if v, err := s.Volume(ctx, "a"); err != nil || v.Size != before.Size {
				t.Fatalf("refused resize changed a: %v %v", v, err)
			}
		})
	}
	ctx := testCtx(t)
	s := setup(t, 4, 1, 10)
	addVolume(t, s, "a", 2, 1, 1)
	u := guardNow(t, s)
	if _, err := s.CreateVolumeIf(ctx, VolumeSpec{Name: "a", Size: testSlot, Layout: Layout{K: 2, M: 1, Chunk: 4096}}, u); !errors.Is(err, ErrExists) {
		t.Fatalf("create of a taken name: %v, want ErrExists", err)
	}
	if _, err := s.CreateVolumeIf(ctx, VolumeSpec{Name: "b", Size: testSlot, Layout: Layout{K: 2, M: 1, Chunk: 4096}}, u); err != nil {
		t.Fatalf("create with nothing changed: %v", err)
	}
	u = guardNow(t, s)
	if v, err := s.ResizeVolumeIf(ctx, "a", 8*testSlot, u); err != nil || v.Size != 8*testSlot {
		t.Fatalf("resize with nothing changed: %v %v", v, err)
	}
	if _, err := s.ResizeVolumeIf(ctx, "a", 8*testSlot, Unchanged{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("resize without a revision: %v, want ErrInvalid", err)
	}
}

// guardNow returns a guard at s's current revision naming its namespaces.
func guardNow(t *testing.T, s *Store) Unchanged {
	t.Helper()
	ctx := testCtx(t)
	view, err := s.At(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nss, err := view.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u := Unchanged{Rev: view.Rev()}
	for _, n := range nss {
		u.Namespaces = append(u.Namespaces, n.ID)
	}
	return u
}
