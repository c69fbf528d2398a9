package volclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
)

// WipedLabel is the label WipeLabel cleared, as `nvstripe ns wipe-label -o
// json` prints it.
type WipedLabel struct {
	NQN       string `json:"nqn"`
	NSID      uint32 `json:"nsid"`
	ClusterID string `json:"cluster_id"` // "" for a corrupt label
	Namespace string `json:"namespace"`  // "" for a corrupt label
	SlotSize  int64  `json:"slot_size"`
	// Corrupt: the block began as a label does but did not decode (a bad
	// checksum, version or field).
	Corrupt bool `json:"corrupt"`
}

// WipeLabel clears (zeroes) the label of the namespace spec names (NQN,
// NSID, Paths; connecting as o says), so that `ns add` can label it: the
// way out of a label written by mistake. It refuses, changing nothing:
//   - a namespace recorded in etcd with that NQN and NSID (in service:
//     remove the record first, `nvstripe ns rm`),
//   - this cluster's label of a namespace id that is recorded,
//   - another cluster's label, unless force (this etcd cannot tell whether
//     that cluster uses it),
//   - a blank label block (nothing to wipe, meta.ErrNoLabel) and data that
//     is no label at all (never overwritten).
//
// A corrupt label (the label's magic, but a bad checksum or field) is
// wiped.
func WipeLabel(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, o NamespaceOptions, force bool) (WipedLabel, error) {
	w := WipedLabel{NQN: spec.NQN, NSID: spec.NSID}
	for _, p := range spec.Paths {
		if err := meta.CheckPathAddr(p.Addr); err != nil {
			return w, err
		}
	}
	if n, err := s.NamespaceAt(ctx, spec.NQN, spec.NSID); err == nil {
		return w, fmt.Errorf("%s nsid %d is recorded as namespace %s (state %s): its label is not wiped while it is in service; "+
			"empty it (`nvstripe admin drain %s --wait` or `nvstripe admin fail %s`) and remove it (`nvstripe ns rm %s`) first: %w",
			spec.NQN, spec.NSID, n.ID, n.State, n.ID, n.ID, n.ID, meta.ErrBusy)
	} else if !errors.Is(err, meta.ErrNotFound) {
		return w, err
	}
	c, err := s.Cluster(ctx)
	if err != nil {
		return w, err
	}
	dev, err := connectSpec(ctx, spec, o)
	if err != nil {
		return w, err
	}
	defer dev.Close()
	b, err := readLabelBlock(ctx, dev)
	if err != nil {
		return w, fmt.Errorf("%s nsid %d: %w", spec.NQN, spec.NSID, err)
	}
	if w, err = wipeable(ctx, s, c, w, b, force); err != nil {
		return w, err
	}
	if err := blockdev.WriteFUA(ctx, dev, make([]byte, meta.LabelSize), 0); err != nil {
		return w, fmt.Errorf("%s nsid %d: wiping the label: %w", spec.NQN, spec.NSID, err)
	}
	return w, nil
}

// wipeable decodes label block b into w and says whether WipeLabel may
// clear it (nil) or why not.
func wipeable(ctx context.Context, s *meta.Store, c *meta.ClusterRecord, w WipedLabel, b []byte, force bool) (WipedLabel, error) {
	l, err := meta.DecodeLabel(b)
	switch {
	case errors.Is(err, meta.ErrNoLabel):
		return w, fmt.Errorf("%s nsid %d: nothing to wipe: %w", w.NQN, w.NSID, err)
	case err != nil && meta.IsLabelBlock(b):
		w.Corrupt = true
		return w, nil
	case err != nil:
		return w, fmt.Errorf("%s nsid %d: %w; wipe-label clears nvstripe labels only", w.NQN, w.NSID, err)
	}
	w.ClusterID, w.Namespace, w.SlotSize = l.ClusterID, l.Namespace, l.SlotSize
	if l.ClusterID != c.ID {
		if force {
			return w, nil
		}
		return w, fmt.Errorf("%s nsid %d carries the label of namespace %s of cluster %s, not this one (%s): this etcd cannot tell whether that "+
			"cluster uses it; --force wipes it: %w", w.NQN, w.NSID, l.Namespace, l.ClusterID, c.ID, meta.ErrLabelMismatch)
	}
	if n, err := s.Namespace(ctx, l.Namespace); err == nil {
		return w, fmt.Errorf("%s nsid %d carries the label of namespace %s, which is recorded (at %s nsid %d, state %s): not wiped; "+
			"remove the record first (`nvstripe ns rm %s`): %w", w.NQN, w.NSID, n.ID, n.NQN, n.NSID, n.State, n.ID, meta.ErrBusy)
	} else if !errors.Is(err, meta.ErrNotFound) {
		return w, err
	}
	return w, nil
}
