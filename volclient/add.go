package volclient

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/nvstripe/nvstripe/blockdev"
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
// connects over the spec's paths as hostNQN ("": the initiator's default),
// reads the size and checks the label, writing the cluster's on a blank
// namespace; another cluster's label, or data where the label goes, is
// refused (never overwritten). It also records whether the namespace can
// fence (NVMe reservations, meta.NamespaceRecord.Unfenced): one that cannot
// takes no shards unless spec.AllowUnfenced. With a size it only records
// it, without connecting or labelling: a volume treats a namespace without
// its label as missing (Namespaces.Device).
//
// Everything that can be checked is checked before the label is written:
// the paths, the host, the id, that the NQN and NSID are not recorded (a
// recorded one on a blank disk is a replaced disk: refused, naming the
// operator's steps), that the namespace answers on every path and holds
// two slots. A failure leaves nothing behind; when the etcd transaction
// fails after the label was written, the label block is put back as it
// was.
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
	if old, err := s.NamespaceAt(ctx, spec.NQN, spec.NSID); err == nil {
		return nil, recordedError(ctx, s, spec, o, old)
	} else if !errors.Is(err, meta.ErrNotFound) {
		return nil, err
	}
	if _, err := s.CheckNamespace(ctx, spec); err != nil {
		return nil, err
	}
	if spec.Size != 0 {
		return s.AddNamespace(ctx, spec)
	}
	c, err := s.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	dev, err := connectSpec(ctx, spec, o)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	if err := allPathsUp(spec, dev); err != nil {
		return nil, err
	}
	spec.Size, spec.Unfenced = dev.Size(), !dev.CanReserve()
	return addLabelled(ctx, s, spec, dev, c)
}

// allPathsUp checks that every path of spec reached the namespace when dev
// was opened (the initiator opens with any one and drops a path that
// reaches another namespace): a path that did not, mistyped or down, is
// refused rather than recorded dead.
func allPathsUp(spec meta.NamespaceSpec, dev *initiator.Device) error {
	for _, p := range dev.Paths() {
		if !p.Connected {
			why := p.LastError
			if why == nil {
				why = errors.New("not connected")
			}
			return fmt.Errorf("%s nsid %d: path tcp://%s does not reach it (%w); every --path must, or leave that one out",
				spec.NQN, spec.NSID, p.Addr, why)
		}
	}
	return nil
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

// afterLabel, when set (by tests), runs between the label write and the
// etcd transaction of addLabelled: where another command may change etcd.
var afterLabel func()

// addLabelled checks that spec, now with its size, can be recorded, labels
// dev for it (a blank one; one that carries this very label is left alone)
// and records it. When the record fails after the label was written, the
// label block is restored.
func addLabelled(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, dev blockdev.Device, c *meta.ClusterRecord) (*meta.NamespaceRecord, error) {
	if _, err := s.CheckNamespace(ctx, spec); err != nil {
		return nil, err
	}
	old, err := readLabelBlock(ctx, dev)
	if err != nil {
		return nil, fmt.Errorf("%s nsid %d: %w", spec.NQN, spec.NSID, err)
	}
	want := c.Label(spec.ID)
	switch err := meta.CheckLabel(old, want); {
	case err == nil: // labelled by an add whose record did not commit
		return s.AddNamespace(ctx, spec)
	case !errors.Is(err, meta.ErrNoLabel):
		return nil, labelRefusal(ctx, s, spec, old, err)
	}
	b, err := meta.EncodeLabel(want)
	if err != nil {
		return nil, err
	}
	if err := blockdev.WriteFUA(ctx, dev, b, 0); err != nil {
		return nil, fmt.Errorf("%s nsid %d: writing the label: %w", spec.NQN, spec.NSID, err)
	}
	if afterLabel != nil {
		afterLabel()
	}
	rec, err := s.AddNamespace(ctx, spec)
	if err != nil {
		return nil, undoLabel(ctx, s, spec, dev, old, err)
	}
	return rec, nil
}

// undoLabel puts the label block back as it was before addLabelled wrote
// it, after the record failed with err, unless the record is in etcd after
// all (an answer lost on the way back): then the label stays. It returns
// err saying what was done.
func undoLabel(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, dev blockdev.Device, old []byte, err error) error {
	n, rerr := s.NamespaceAt(ctx, spec.NQN, spec.NSID)
	switch {
	case rerr == nil && n.ID == spec.ID:
		return fmt.Errorf("%w (the record was written after all: `nvstripe ns ls` shows it)", err)
	case rerr != nil && !errors.Is(rerr, meta.ErrNotFound):
		return fmt.Errorf("%w; the label written for %s is left on the namespace (etcd could not say whether the record was written: %w); "+
			"run the same `nvstripe ns add` again, or clear it with `nvstripe ns wipe-label --nqn %s --nsid %d --path ...`", err, spec.ID, rerr, spec.NQN, spec.NSID)
	}
	if werr := blockdev.WriteFUA(ctx, dev, old, 0); werr != nil {
		return fmt.Errorf("%w; restoring the label block failed too (%w): clear it with `nvstripe ns wipe-label --nqn %s --nsid %d --path ...`",
			err, werr, spec.NQN, spec.NSID)
	}
	return fmt.Errorf("%w (the label written for %s was taken off again)", err, spec.ID)
}

// readLabelBlock reads the first meta.LabelSize bytes of dev.
func readLabelBlock(ctx context.Context, dev blockdev.Device) ([]byte, error) {
	b := make([]byte, meta.LabelSize)
	if err := dev.ReadAt(ctx, b, 0); err != nil {
		return nil, fmt.Errorf("reading the label: %w", err)
	}
	return b, nil
}

// labelRefusal is the error of a namespace whose label block holds
// something other than the cluster's label for it (err, from
// meta.CheckLabel): it says whose label it is and how to clear one that is
// not in service.
func labelRefusal(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, block []byte, err error) error {
	l, derr := meta.DecodeLabel(block)
	c, cerr := s.Cluster(ctx)
	switch {
	case derr != nil || cerr != nil: // other data, or a corrupt label
		return fmt.Errorf("%s nsid %d: %w", spec.NQN, spec.NSID, err)
	case l.ClusterID != c.ID:
		return fmt.Errorf("%s nsid %d: %w; if cluster %s no longer uses it, `nvstripe ns wipe-label --nqn %s --nsid %d --path ... --force` clears it",
			spec.NQN, spec.NSID, err, l.ClusterID, spec.NQN, spec.NSID)
	}
	if n, nerr := s.Namespace(ctx, l.Namespace); nerr == nil {
		return fmt.Errorf("%s nsid %d: %w; the label is that of namespace %s, recorded at %s nsid %d: is --nqn, --nsid or --path mistyped?",
			spec.NQN, spec.NSID, err, n.ID, n.NQN, n.NSID)
	}
	return fmt.Errorf("%s nsid %d: %w; namespace %s is not recorded (a label left by an add that failed): "+
		"`nvstripe ns wipe-label --nqn %s --nsid %d --path ...` clears it", spec.NQN, spec.NSID, err, l.Namespace, spec.NQN, spec.NSID)
}

// recordedError is the error of adding spec when its NQN and NSID are
// recorded already, as old. Connected (spec without a size), it says what
// the disk carries: old's label (nothing to do), none (a blank disk
// replaced the recorded one: the steps to bring it in) or another.
func recordedError(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, o NamespaceOptions, old *meta.NamespaceRecord) error {
	err := meta.AlreadyRecorded(old)
	if spec.Size != 0 {
		return err
	}
	c, cerr := s.Cluster(ctx)
	if cerr != nil {
		return err
	}
	dev, cerr := connectSpec(ctx, spec, o)
	if cerr != nil {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	defer dev.Close()
	b, rerr := readLabelBlock(ctx, dev)
	if rerr != nil {
		return fmt.Errorf("%w (%w)", err, rerr)
	}
	lerr := meta.CheckLabel(b, c.Label(old.ID))
	switch {
	case lerr == nil:
		return fmt.Errorf("%w; its label matches: nothing to do", err)
	case errors.Is(lerr, meta.ErrNoLabel):
		return replacedDiskError(ctx, s, old)
	}
	return fmt.Errorf("%w; the namespace does not carry its label (%w)", err, lerr)
}

// replacedDiskError says what to do with a blank disk that answers as
// recorded namespace old: it holds none of old's data, so it is not taken
// in its place; old's shards are rebuilt elsewhere, its record removed, and
// then the disk is added as a new, empty namespace.
func replacedDiskError(ctx context.Context, s *meta.Store, old *meta.NamespaceRecord) error {
	steps := fmt.Sprintf("remove the old record with `nvstripe ns rm %s`, then run this `ns add` again", old.ID)
	if a, err := s.Allocation(ctx, old.ID); err != nil || a.Used > 0 {
		steps = fmt.Sprintf("mark it failed (`nvstripe admin fail %s`) so that the controller rebuilds its shards elsewhere, "+
			"wait until `nvstripe ns ls` shows it holding no slot, remove it (`nvstripe ns rm %s`), then run this `ns add` again", old.ID, old.ID)
	}
	return fmt.Errorf("namespace %s nsid %d is recorded as %q (state %s) but its disk carries no label: a blank replacement holds none of its data "+
		"and is not taken for it; %s: %w", old.NQN, old.NSID, old.ID, old.State, steps, meta.ErrExists)
}

// connectSpec opens the namespace of spec over its paths, one queue.
func connectSpec(ctx context.Context, spec meta.NamespaceSpec, o NamespaceOptions) (*initiator.Device, error) {
	var addrs []string
	for _, p := range spec.Paths {
		addrs = append(addrs, strings.TrimPrefix(p.Addr, "tcp://"))
	}
	dev, err := initiator.Open(ctx, initiator.Options{HostNQN: o.HostNQN, DHCHAPSecret: o.DHCHAPSecret, DHCHAPCtrlSecret: o.DHCHAPCtrlSecret,
		TLSKey: o.TLSKey, HostTraddr: o.HostTraddr, SubsysNQN: spec.NQN, NSID: spec.NSID, Paths: addrs, IOQueues: 1})
	if err != nil {
		return nil, &ConnectError{fmt.Errorf("connect to %s nsid %d at %s: %w", spec.NQN, spec.NSID, strings.Join(addrs, ","), err)}
	}
	return dev, nil
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
// o.HostNQN (over TLS with o.TLSKey, for a target that requires it) and,
// for every NVMe subsystem in it, adds namespaces 1, 2, ... on host, with
// all the subsystem's TCP paths, as AddNamespaceAs does with o (its
// DH-HMAC-CHAP secrets and TLS key), until
// one does not answer (at most maxNSID). Namespaces already recorded (the
// same subsystem NQN and NSID, whatever their id) are skipped; a new one
// gets the first free id of discoveredIDs. allowUnfenced is AddNamespace's
// spec.AllowUnfenced. Each namespace gone through is passed to report;
// Discover returns the number of subsystems. A log without one is an error
// (meta.ErrNotFound) that says the host may not be allowed.
func Discover(ctx context.Context, s *meta.Store, addr, host string, o NamespaceOptions, maxNSID uint32, allowUnfenced bool, report func(Discovered)) (int, error) {
	entries, err := initiator.Discover(ctx, strings.TrimPrefix(addr, "tcp://"), initiator.DiscoverOptions{HostNQN: o.HostNQN, TLSKey: o.TLSKey})
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
	if len(order) == 0 {
		return 0, noSubsystem(addr, o.HostNQN)
	}
	known, err := s.Namespaces(ctx)
	if err != nil {
		return 0, err
	}
	r := newRecorded(known)
	for _, nqn := range order {
		spec := meta.NamespaceSpec{Host: host, NQN: nqn, Paths: paths[nqn], AllowUnfenced: allowUnfenced}
		if err := addSubsystem(ctx, s, spec, o, maxNSID, r, report); err != nil {
			return 0, err
		}
	}
	return len(order), nil
}

// noSubsystem is Discover's error for a discovery log without an NVMe
// subsystem: a target lists only those the host may connect to.
func noSubsystem(addr, hostNQN string) error {
	if hostNQN == "" {
		hostNQN = initiator.DefaultHostNQN
	}
	return fmt.Errorf("discover %s: the discovery log lists no NVMe subsystem for host %s (a target lists only the "+
		"subsystems a host may connect to): allow it on the target (`nvstripe target serve --allow-host %s`, or for "+
		"a kernel nvmet target add it to the subsystem's allowed_hosts with nvmetcli), or discover as a host it "+
		"allows (--host-nqn, NVSTRIPE_HOST_NQN or /etc/nvme/hostnqn): %w", addr, hostNQN, hostNQN, meta.ErrNotFound)
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
func addSubsystem(ctx context.Context, s *meta.Store, spec meta.NamespaceSpec, o NamespaceOptions, maxNSID uint32,
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
		rec, err := AddNamespaceAs(ctx, s, spec, o)
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
func DiscoverAll(ctx context.Context, s *meta.Store, addr, host string, o NamespaceOptions, maxNSID uint32, allowUnfenced bool, each func(Discovered)) (DiscoverReport, error) {
	rep := DiscoverReport{Added: []*meta.NamespaceRecord{}, Known: []string{}}
	var err error
	rep.Subsystems, err = Discover(ctx, s, addr, host, o, maxNSID, allowUnfenced, func(d Discovered) {
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
