package volclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// ConnectError is a failure to open a namespace over NVMe/TCP (AddNamespace
// returns it wrapped): nothing answers as that namespace on its paths.
type ConnectError struct{ Err error }

func (e *ConnectError) Error() string { return e.Err.Error() }
func (e *ConnectError) Unwrap() error { return e.Err }

// AddNamespace records namespace spec in etcd (state in). Without a size it
// first connects over the spec's paths as hostNQN ("": the initiator's
// default), reads the size and checks the label, writing the cluster's on a
// blank namespace; another cluster's label, or data where the label goes,
// is refused (never overwritten). It also records whether the namespace can
// fence (NVMe reservations, meta.NamespaceRecord.Unfenced): one that cannot
// takes no shards unless spec.AllowUnfenced. With a size it only records
// it: the first node that opens the namespace then labels it, and a
// namespace that cannot fence is only found at map time (a warning).
func AddNamespace(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, hostNQN string) (*meta.NamespaceRecord, error) {
	return AddNamespaceAs(ctx, s, spec, NamespaceOptions{HostNQN: hostNQN})
}

// AddNamespaceAs is AddNamespace connecting with o's host NQN and
// DH-HMAC-CHAP secrets.
func AddNamespaceAs(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, o NamespaceOptions) (*meta.NamespaceRecord, error) {
	for _, p := range spec.Paths {
		if err := meta.CheckPathAddr(p.Addr); err != nil {
			return nil, err
		}
	}
	if spec.Size == 0 {
		c, err := s.Cluster(ctx)
		if err != nil {
			return nil, err
		}
		id := spec.ID
		if id == "" {
			id = meta.DefaultNamespaceID(spec.Host, spec.NSID)
		}
		if spec.Size, spec.Unfenced, err = labelNamespace(ctx, spec, o, c.Label(id)); err != nil {
			return nil, err
		}
	}
	return s.AddNamespace(ctx, spec)
}

// labelNamespace opens the namespace, checks its label (writing want on a
// blank one) and returns its size and whether it cannot fence.
func labelNamespace(ctx context.Context, spec meta.NamespaceSpec, o NamespaceOptions, want meta.Label) (size int64, unfenced bool, err error) {
	var addrs []string
	for _, p := range spec.Paths {
		addrs = append(addrs, strings.TrimPrefix(p.Addr, "tcp://"))
	}
	dev, err := initiator.Open(ctx, initiator.Options{HostNQN: o.HostNQN, DHCHAPSecret: o.DHCHAPSecret, DHCHAPCtrlSecret: o.DHCHAPCtrlSecret,
		HostTraddr: o.HostTraddr, SubsysNQN: spec.NQN, NSID: spec.NSID, Paths: addrs, IOQueues: 1})
	if err != nil {
		return 0, false, &ConnectError{fmt.Errorf("connect to %s nsid %d at %s: %w", spec.NQN, spec.NSID, strings.Join(addrs, ","), err)}
	}
	defer dev.Close()
	if err := WriteLabel(ctx, dev, want); err != nil {
		return 0, false, fmt.Errorf("%s nsid %d: %w", spec.NQN, spec.NSID, err)
	}
	return dev.Size(), !dev.CanReserve(), nil
}

// Discovered is one namespace Discover went through: added (Added) or
// recorded before (Known, its id).
type Discovered struct {
	NQN   string
	NSID  uint32
	Added *meta.NamespaceRecord
	Known string
}

// Discover reads the discovery log page at addr (tcp://ADDR:PORT) as
// hostNQN and, for every NVMe subsystem in it, adds namespaces 1, 2, ...
// on host, with all the subsystem's TCP paths, as AddNamespace does, until
// one does not answer (at most maxNSID). Namespaces already recorded are
// skipped; allowUnfenced is AddNamespace's spec.AllowUnfenced. Each
// namespace gone through is passed to report; Discover returns the number
// of subsystems.
func Discover(ctx context.Context, s *meta.Store, addr, host, hostNQN string, maxNSID uint32, allowUnfenced bool, report func(Discovered)) (int, error) {
	entries, err := initiator.Discover(ctx, strings.TrimPrefix(addr, "tcp://"), initiator.DiscoverOptions{HostNQN: hostNQN})
	if err != nil {
		return 0, fmt.Errorf("discover %s: %w", addr, err)
	}
	paths := map[string][]meta.PathRecord{}
	var order []string
	for _, e := range entries {
		if e.SubType != pdu.SubTypeNVMe {
			continue
		}
		if _, seen := paths[e.SubNQN]; !seen {
			order = append(order, e.SubNQN)
		}
		paths[e.SubNQN] = append(paths[e.SubNQN], meta.PathRecord{Addr: "tcp://" + e.TrAddr + ":" + e.TrSvcID})
	}
	known, err := s.Namespaces(ctx)
	if err != nil {
		return 0, err
	}
	recorded := map[string]string{}
	for _, n := range known {
		recorded[fmt.Sprintf("%s/%d", n.NQN, n.NSID)] = n.ID
	}
	for _, nqn := range order {
		spec := meta.NamespaceSpec{Host: host, NQN: nqn, Paths: paths[nqn], AllowUnfenced: allowUnfenced}
		if err := addSubsystem(ctx, s, spec, hostNQN, maxNSID, recorded, report); err != nil {
			return 0, err
		}
	}
	return len(order), nil
}

// addSubsystem adds the namespaces of one discovered subsystem.
func addSubsystem(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, hostNQN string, maxNSID uint32,
	recorded map[string]string, report func(Discovered)) error {
	for nsid := uint32(1); nsid <= maxNSID; nsid++ {
		if id, ok := recorded[fmt.Sprintf("%s/%d", spec.NQN, nsid)]; ok {
			report(Discovered{NQN: spec.NQN, NSID: nsid, Known: id})
			continue
		}
		spec.NSID = nsid
		rec, err := AddNamespace(ctx, s, spec, hostNQN)
		if ce := (*ConnectError)(nil); nsid > 1 && errors.As(err, &ce) {
			return nil // no namespace nsid: the subsystem's list ended
		}
		if err != nil {
			return err
		}
		report(Discovered{NQN: spec.NQN, NSID: nsid, Added: rec})
	}
	return nil
}

// DiscoverReport is what a discovery went through, as `ns discover -o
// json` prints it.
type DiscoverReport struct {
	Added      []*meta.NamespaceRecord `json:"added"`
	Known      []string                `json:"already_recorded"` // IDs of namespaces recorded before
	Subsystems int                     `json:"subsystems"`
}

// DiscoverAll is Discover collecting what it goes through; each (nil:
// none) also gets every namespace as it is gone through.
func DiscoverAll(ctx context.Context, s *meta.Store, addr, host, hostNQN string, maxNSID uint32, allowUnfenced bool, each func(Discovered)) (DiscoverReport, error) {
	rep := DiscoverReport{Added: []*meta.NamespaceRecord{}, Known: []string{}}
	var err error
	rep.Subsystems, err = Discover(ctx, s, addr, host, hostNQN, maxNSID, allowUnfenced, func(d Discovered) {
		if d.Added != nil {
			rep.Added = append(rep.Added, d.Added)
		} else {
			rep.Known = append(rep.Known, d.Known)
		}
		if each != nil {
			each(d)
		}
	})
	return rep, err
}
