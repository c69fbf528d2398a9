package volclient

import (
	"context"
	"crypto/sha256"
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
	if spec.ID == "" {
		id, err := defaultID(ctx, s, spec)
		if err != nil {
			return nil, err
		}
		spec.ID = id
	}
	if spec.Size == 0 {
		c, err := s.Cluster(ctx)
		if err != nil {
			return nil, err
		}
		if spec.Size, spec.Unfenced, err = labelNamespace(ctx, spec, o, c.Label(spec.ID)); err != nil {
			return nil, err
		}
	}
	return s.AddNamespace(ctx, spec)
}

// defaultID is the id a spec without one is recorded as,
// meta.DefaultNamespaceID, checked before any label is written: taken by
// another namespace (another subsystem of the host with the same NSID), it
// is refused and the operator asked to name this one.
func defaultID(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec) (string, error) {
	id := meta.DefaultNamespaceID(spec.Host, spec.NSID)
	n, err := s.Namespace(ctx, id)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return id, nil
	case err != nil:
		return "", err
	case n.NQN != spec.NQN || n.NSID != spec.NSID:
		return "", fmt.Errorf("namespace id %q is taken by %s nsid %d; pass --id to name %s nsid %d: %w",
			id, n.NQN, n.NSID, spec.NQN, spec.NSID, meta.ErrExists)
	}
	return id, nil // the same namespace: AddNamespace says it is recorded
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
// one does not answer (at most maxNSID). Namespaces already recorded (the
// same subsystem NQN and NSID, whatever their id) are skipped; a new one
// gets the first free id of discoveredIDs. allowUnfenced is AddNamespace's
// spec.AllowUnfenced. Each namespace gone through is passed to report;
// Discover returns the number of subsystems.
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
	r := newRecorded(known)
	for _, nqn := range order {
		spec := meta.NamespaceSpec{Host: host, NQN: nqn, Paths: paths[nqn], AllowUnfenced: allowUnfenced}
		if err := addSubsystem(ctx, s, spec, hostNQN, maxNSID, r, report); err != nil {
			return 0, err
		}
	}
	return len(order), nil
}

// recorded is what Discover knows is in etcd: namespace ids by identity
// (NQN/NSID) and the ids taken.
type recorded struct {
	byIdentity map[string]string
	taken      map[string]bool
}

func newRecorded(known []*meta.NamespaceRecord) recorded {
	r := recorded{byIdentity: map[string]string{}, taken: map[string]bool{}}
	for _, n := range known {
		r.add(n)
	}
	return r
}

func (r recorded) add(n *meta.NamespaceRecord) {
	r.byIdentity[identity(n.NQN, n.NSID)] = n.ID
	r.taken[n.ID] = true
}

func identity(nqn string, nsid uint32) string { return fmt.Sprintf("%s/%d", nqn, nsid) }

// addSubsystem adds the namespaces of one discovered subsystem.
func addSubsystem(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, hostNQN string, maxNSID uint32,
	r recorded, report func(Discovered)) error {
	for nsid := uint32(1); nsid <= maxNSID; nsid++ {
		if id, ok := r.byIdentity[identity(spec.NQN, nsid)]; ok {
			report(Discovered{NQN: spec.NQN, NSID: nsid, Known: id})
			continue
		}
		spec.NSID = nsid
		var err error
		if spec.ID, err = r.freeID(spec.Host, spec.NQN, nsid); err != nil {
			return err
		}
		rec, err := AddNamespace(ctx, s, spec, hostNQN)
		if ce := (*ConnectError)(nil); nsid > 1 && errors.As(err, &ce) {
			return nil // no namespace nsid: the subsystem's list ended
		}
		if err != nil {
			return err
		}
		r.add(rec)
		report(Discovered{NQN: spec.NQN, NSID: nsid, Added: rec})
	}
	return nil
}

// freeID is the first of discoveredIDs not taken.
func (r recorded) freeID(host, nqn string, nsid uint32) (string, error) {
	ids := discoveredIDs(host, nqn, nsid)
	for _, id := range ids {
		if !r.taken[id] {
			return id, nil
		}
	}
	return "", fmt.Errorf("%s nsid %d: ids %s are all taken; add it with `nvstripe ns add --id`: %w",
		nqn, nsid, strings.Join(ids, ", "), meta.ErrExists)
}

// discoveredIDs are the ids a discovered namespace may get, in order of
// preference: HOST-nNSID (meta.DefaultNamespaceID, what the first
// subsystem of a host gets, as `ns add` names it), then, for a host's other
// subsystems with the same NSIDs, HOST-TAIL-nNSID with TAIL the NQN's last
// ':' field, then HOST-HASH-nNSID with HASH from the whole NQN. They depend
// only on the host and the namespace (a rerun finds what it recorded by
// NQN and NSID, whatever its id); ids too long to be names are left out.
func discoveredIDs(host, nqn string, nsid uint32) []string {
	tail := nqn[strings.LastIndex(nqn, ":")+1:]
	tail = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, tail)
	sum := sha256.Sum256([]byte(nqn))
	ids := []string{meta.DefaultNamespaceID(host, nsid)}
	for _, mid := range []string{tail, fmt.Sprintf("%x", sum[:4])} {
		if id := meta.DefaultNamespaceID(host+"-"+mid, nsid); mid != "" && len(id) <= 63 {
			ids = append(ids, id)
		}
	}
	return ids
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
