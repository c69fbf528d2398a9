package meta

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The schema. Every key of a cluster starts with /nvstripe/<cluster>/:
//
//	cluster                        ClusterRecord: id, slot size, schema version, domain label
//	hosts/<host>                   HostRecord: failure-domain labels
//	ns/<ns>                        NamespaceRecord: host, NQN, NSID, UUID, size, paths, state
//	alloc/<ns>                     AllocRecord: the namespace's slot bitmap (slot 0 = label)
//	vol/<volume>                   VolumeRecord: size, layout, state
//	seg/<volume>/<%016x index>     SegmentRecord: k+m slots, version, in-flight move
//	dirty/<volume>/<%016x index>   DirtyRecord: the segment's dirty flag (present = dirty)
//	stale/<volume>/<%016x>/<slot>  StaleRecord: the slot missed writes at this location (stale.go)
//	unsettled/<volume>/<%016x>     UnsettledRecord: the segment's unsettled blocks (unsettled.go)
//	owner/<volume>/rw              OwnerRecord, bound to the owner's lease
//	owner/<volume>/ro/<holder>     OwnerRecord, bound to a read-only owner's lease
//	lastrw/<volume>                OwnerRecord of the last read-write owner (no lease: kept
//	                               when it goes; its mod revision is that owner's epoch)
//	leader/                        controller election (etcd concurrency.Election)
//	task/<id>                      TaskRecord: progress of a long-running job
//	gossip/<member>                GossipRecord: a gossip member's seed (gossip.go)
//
// Segment indexes are fixed-width hex so that keys sort in segment order.
// The dirty flag of a segment is a key of its own, not a field of the segment
// record: marking dirty is then a small put that does not race with moves
// rewriting the segment, and Dirty lists only the dirty segments instead of
// scanning them all after a crash.
type keys struct{ root string }

func newKeys(cluster string) keys { return keys{root: "/nvstripe/" + cluster + "/"} }

func (k keys) cluster() string            { return k.root + "cluster" }
func (k keys) hosts() string              { return k.root + "hosts/" }
func (k keys) host(name string) string    { return k.hosts() + name }
func (k keys) namespaces() string         { return k.root + "ns/" }
func (k keys) namespace(id string) string { return k.namespaces() + id }
func (k keys) allocs() string             { return k.root + "alloc/" }
func (k keys) alloc(id string) string     { return k.allocs() + id }
func (k keys) volumes() string            { return k.root + "vol/" }
func (k keys) volume(name string) string  { return k.volumes() + name }
func (k keys) allSegments() string        { return k.root + "seg/" }
func (k keys) segments(vol string) string { return k.allSegments() + vol + "/" }
func (k keys) segment(vol string, i int64) string {
	return k.segments(vol) + fmt.Sprintf("%016x", i)
}
func (k keys) dirties(vol string) string { return k.root + "dirty/" + vol + "/" }
func (k keys) dirty(vol string, i int64) string {
	return k.dirties(vol) + fmt.Sprintf("%016x", i)
}
func (k keys) allOwners() string                 { return k.root + "owner/" }
func (k keys) owners(vol string) string          { return k.allOwners() + vol + "/" }
func (k keys) ownerRW(vol string) string         { return k.owners(vol) + "rw" }
func (k keys) ownersRO(vol string) string        { return k.owners(vol) + "ro/" }
func (k keys) ownerRO(vol, holder string) string { return k.ownersRO(vol) + holder }
func (k keys) lastRW(vol string) string          { return k.root + "lastrw/" + vol }
func (k keys) leader() string                    { return k.root + "leader/" }
func (k keys) tasks() string                     { return k.root + "task/" }
func (k keys) task(id string) string             { return k.tasks() + id }

// segmentIndex parses the index at the end of a seg/ or dirty/ key.
func segmentIndex(key, prefix string) (int64, error) {
	hex, ok := strings.CutPrefix(key, prefix)
	if !ok || len(hex) != 16 {
		return 0, fmt.Errorf("key %q: not a segment key under %q: %w", key, prefix, ErrCorruptRecord)
	}
	i, err := strconv.ParseUint(hex, 16, 63)
	if err != nil {
		return 0, fmt.Errorf("key %q: bad segment index: %w", key, ErrCorruptRecord)
	}
	return int64(i), nil
}

// checkName validates a name used inside keys: 1-63 characters of letters,
// digits, '.', '_' and '-', starting with a letter or digit.
func checkName(what, name string) error {
	ok := len(name) >= 1 && len(name) <= 63 && name[0] != '.' && name[0] != '_' && name[0] != '-'
	for _, r := range name {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}
	if !ok {
		return fmt.Errorf("%s name %q: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit: %w",
			what, name, ErrInvalid)
	}
	return nil
}

func isUnavailable(err error) bool {
	return status.Code(err) == codes.Unavailable
}
