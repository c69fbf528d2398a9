package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nvstripe/nvstripe/placement"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// Versions. RecordVersion is the "v" of every record this code writes and the
// only one it reads; SchemaVersion is the layout of keys, kept in the cluster
// record.
const (
	RecordVersion = 1
	SchemaVersion = 1
)

// versioned is embedded in every record: its "v" field.
type versioned struct {
	V int `json:"v"`
}

func (v *versioned) version() *int { return &v.V }

// record is what the strict codec reads and writes.
type record interface {
	version() *int
	// check validates the record's invariants.
	check() error
}

// encode stamps the current version on r and marshals it.
func encode(r record) ([]byte, error) {
	*r.version() = RecordVersion
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return json.Marshal(r)
}

// decode reads r strictly from the value stored at key: unknown fields, a
// version other than RecordVersion, trailing data or a failed check are an
// ErrCorruptRecord error naming the key.
func decode(key string, data []byte, r record) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(r)
	if err == nil {
		var extra json.RawMessage
		if dec.Decode(&extra) != io.EOF {
			err = errors.New("trailing data after the record")
		}
	}
	if err == nil && *r.version() != RecordVersion {
		err = fmt.Errorf("record version %d, this build reads version %d", *r.version(), RecordVersion)
	}
	if err == nil {
		err = r.check()
	}
	if err != nil {
		return fmt.Errorf("record %s: %w: %w", key, ErrCorruptRecord, err)
	}
	return nil
}

// ClusterRecord describes the cluster. It never changes after init.
type ClusterRecord struct {
	versioned
	ID       string `json:"id"` // random UUID, written into every namespace label
	Name     string `json:"name"`
	SlotSize int64  `json:"slot_size"`
	Schema   int    `json:"schema"`
	// DomainLabel is the host label naming failure domains ("rack");
	// empty means every host is its own domain.
	DomainLabel string `json:"domain_label,omitempty"`
	// MaxOvercommit caps what thin volumes may promise: the bytes of all
	// volumes after parity over the usable bytes (`nvstripe df`); `volume
	// create` refuses a volume beyond it. 0: DefaultMaxOvercommit.
	MaxOvercommit float64 `json:"max_overcommit,omitempty"`
}

// DefaultMaxOvercommit is the overcommit limit of a cluster that set none:
// thin volumes may promise twice the usable space.
const DefaultMaxOvercommit = 2.0

// OvercommitLimit returns MaxOvercommit, or the default when unset.
func (c *ClusterRecord) OvercommitLimit() float64 {
	if c.MaxOvercommit == 0 {
		return DefaultMaxOvercommit
	}
	return c.MaxOvercommit
}

// CheckOvercommit validates an overcommit limit: from 1 (promise no more
// than there is) to 1000.
func CheckOvercommit(r float64) error {
	if !(r >= 1 && r <= 1000) {
		return fmt.Errorf("max overcommit %g: want a ratio from 1 to 1000: %w", r, ErrInvalid)
	}
	return nil
}

func (c *ClusterRecord) check() error {
	switch {
	case c.ID == "":
		return errors.New("empty cluster id")
	case c.Schema != SchemaVersion:
		return fmt.Errorf("schema version %d, this build knows %d", c.Schema, SchemaVersion)
	case c.MaxOvercommit != 0 && CheckOvercommit(c.MaxOvercommit) != nil:
		return CheckOvercommit(c.MaxOvercommit)
	}
	return CheckSlotSize(c.SlotSize)
}

// HostRecord is a storage host and its failure-domain labels.
type HostRecord struct {
	versioned
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

func (h *HostRecord) check() error {
	if err := checkName("host", h.Name); err != nil {
		return err
	}
	for k := range h.Labels {
		if k == "" {
			return errors.New("empty label key")
		}
	}
	return nil
}

// ANA states of a path, as last seen.
const (
	ANAOptimized      = "optimized"
	ANANonOptimized   = "non-optimized"
	ANAInaccessible   = "inaccessible"
	ANAPersistentLoss = "persistent-loss"
	ANAChange         = "change"
	ANAUnknown        = "unknown"
)

// PathRecord is one way to reach a namespace.
type PathRecord struct {
	Addr     string `json:"addr"` // tcp://HOST:PORT
	ANAGroup uint32 `json:"ana_group"`
	ANAState string `json:"ana_state"`
}

// PathRecords checks each address (CheckPathAddr) and returns their
// records.
func PathRecords(addrs []string) ([]PathRecord, error) {
	var out []PathRecord
	for _, a := range addrs {
		if err := CheckPathAddr(a); err != nil {
			return nil, err
		}
		out = append(out, PathRecord{Addr: a})
	}
	return out, nil
}

// CheckPathAddr validates a path address of the form tcp://HOST:PORT.
func CheckPathAddr(addr string) error {
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "tcp" || u.Path != "" || u.User != nil {
		return fmt.Errorf("path %q: want tcp://HOST:PORT: %w", addr, ErrInvalid)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
		return fmt.Errorf("path %q: want tcp://HOST:PORT with a port from 1 to 65535: %w", addr, ErrInvalid)
	}
	return nil
}

func (p PathRecord) check() error {
	if err := CheckPathAddr(p.Addr); err != nil {
		return err
	}
	switch p.ANAState {
	case ANAOptimized, ANANonOptimized, ANAInaccessible, ANAPersistentLoss, ANAChange, ANAUnknown:
		return nil
	}
	return fmt.Errorf("path %s: unknown ANA state %q", p.Addr, p.ANAState)
}

// NamespaceRecord is one NVMe namespace in the cluster. Slot 0 holds its
// label; slots 1..Slots-1 hold shards.
type NamespaceRecord struct {
	versioned
	ID    string       `json:"id"`
	Host  string       `json:"host"`
	NQN   string       `json:"nqn"`
	NSID  uint32       `json:"nsid"`
	UUID  string       `json:"uuid,omitempty"`
	Size  int64        `json:"size"`  // bytes
	Slots int64        `json:"slots"` // Size / slot size, slot 0 included
	State string       `json:"state"` // placement.State names: in, draining, down, out, failed
	Paths []PathRecord `json:"paths"`
	// Unfenced: the namespace's controller has no NVMe reservations
	// (Identify Controller ONCS bit 5 clear, found at `ns add`), so it
	// cannot refuse a stale owner's writes.
	Unfenced bool `json:"unfenced,omitempty"`
	// AllowUnfenced: the operator accepted an unfenced namespace at
	// `ns add --allow-unfenced`; without it, it takes no shards.
	AllowUnfenced bool `json:"allow_unfenced,omitempty"`
	// Returned: how the namespace last came back from out (ReturnNamespace);
	// cleared when it leaves service again.
	Returned *NamespaceReturn `json:"returned,omitempty"`
}

// Fencing describes whether the namespace refuses a stale owner's writes:
// "yes", "no" (it takes no shards) or "no, allowed".
func (n *NamespaceRecord) Fencing() string {
	switch {
	case n == nil || !n.Unfenced:
		return "yes"
	case n.AllowUnfenced:
		return "no, allowed"
	}
	return "no"
}

// Placeable says whether shards may be placed on the namespace as far as
// fencing goes: it can fence, or the operator allowed it unfenced.
func (n *NamespaceRecord) Placeable() bool { return !n.Unfenced || n.AllowUnfenced }

// FenceWarning is what an operator adding the namespace should hear about
// its fencing: "" when it can fence.
func (n *NamespaceRecord) FenceWarning() string {
	switch {
	case !n.Placeable():
		return fmt.Sprintf("namespace %s cannot fence a stale owner (no NVMe reservations): it takes no shards; add it with --allow-unfenced to use it anyway", n.ID)
	case n.Unfenced:
		return fmt.Sprintf("namespace %s cannot fence a stale owner (no NVMe reservations); allowed: a paused owner may overwrite its successor's data there", n.ID)
	}
	return ""
}

// Capacity is the number of slots available to shards (all but the label's).
func (n *NamespaceRecord) Capacity() int64 { return n.Slots - 1 }

func (n *NamespaceRecord) check() error {
	if err := n.checkIdentity(); err != nil {
		return err
	}
	if n.Size <= 0 || n.Slots < 2 {
		return fmt.Errorf("size %d bytes holds %d slots: need at least 2 (one for the label)", n.Size, n.Slots)
	}
	return nil
}

// checkIdentity is check but for the size: the names, NQN, NSID, state and
// paths.
func (n *NamespaceRecord) checkIdentity() error {
	if err := checkName("namespace", n.ID); err != nil {
		return err
	}
	if err := checkName("host", n.Host); err != nil {
		return err
	}
	switch {
	case n.NQN == "":
		return errors.New("empty NQN")
	case n.NSID == 0 || n.NSID == 0xffffffff:
		return fmt.Errorf("NSID %d: must be from 1 to 0xfffffffe", n.NSID)
	}
	if _, err := placement.ParseState(n.State); err != nil {
		return err
	}
	for _, p := range n.Paths {
		if err := p.check(); err != nil {
			return err
		}
	}
	return nil
}

// AllocRecord is a namespace's slot allocation: bit i of Bitmap (LSB first)
// is set when slot i is in use. Slot 0 (the label) is always set.
//
// Invariants: len(Bitmap) == ceil(Slots/8); bit 0 set; no bit at or above
// Slots set; Used == set bits - 1.
type AllocRecord struct {
	versioned
	Slots  int64  `json:"slots"`
	Used   int64  `json:"used"`
	Bitmap []byte `json:"bitmap"`
}

func newAlloc(slots int64) *AllocRecord {
	a := &AllocRecord{Slots: slots, Bitmap: make([]byte, (slots+7)/8)}
	a.Bitmap[0] = 1
	return a
}

func (a *AllocRecord) check() error {
	if a.Slots < 2 || int64(len(a.Bitmap)) != (a.Slots+7)/8 {
		return fmt.Errorf("bitmap of %d bytes for %d slots", len(a.Bitmap), a.Slots)
	}
	if a.Bitmap[0]&1 == 0 {
		return errors.New("label slot 0 not reserved")
	}
	if rem := a.Slots % 8; rem != 0 && a.Bitmap[len(a.Bitmap)-1]>>rem != 0 {
		return errors.New("bits set past the last slot")
	}
	n := int64(0)
	for _, b := range a.Bitmap {
		n += int64(bits.OnesCount8(b))
	}
	if n-1 != a.Used {
		return fmt.Errorf("used %d but %d slots set", a.Used, n-1)
	}
	return nil
}

func (a *AllocRecord) isSet(slot int64) bool { return a.Bitmap[slot/8]&(1<<(slot%8)) != 0 }

// take reserves the lowest free slot and returns it, or -1 when full.
func (a *AllocRecord) take() int64 {
	for i, b := range a.Bitmap {
		if b == 0xff {
			continue
		}
		slot := int64(i)*8 + int64(bits.TrailingZeros8(^b))
		if slot >= a.Slots {
			return -1
		}
		a.Bitmap[i] |= 1 << (slot % 8)
		a.Used++
		return slot
	}
	return -1
}

// release frees slot; it fails when the slot is not in use (a double free).
func (a *AllocRecord) release(slot int64) error {
	if slot < 1 || slot >= a.Slots || !a.isSet(slot) {
		return fmt.Errorf("slot %d is not allocated", slot)
	}
	a.Bitmap[slot/8] &^= 1 << (slot % 8)
	a.Used--
	return nil
}

func (a *AllocRecord) clone() *AllocRecord {
	c := *a
	c.Bitmap = bytes.Clone(a.Bitmap)
	return &c
}

// Layout is a volume's erasure-coding layout: K data and M parity shards of
// Chunk bytes per stripe, and its on-disk format.
type Layout struct {
	K     int   `json:"k"`
	M     int   `json:"m"`
	Chunk int64 `json:"chunk"`
	// Checksum is ChecksumCRC32C for volumes whose slots end in a checksum
	// area (volume format 2, layout.Geometry.Checksums), empty for volumes
	// without (format 1: every volume made before checksums existed, or
	// created with none). Builds that predate the field refuse a record
	// that has it (decode rejects unknown fields), so they never write a
	// checksummed volume without its checksums.
	Checksum string `json:"checksum,omitempty"`
	// WriteLog is WriteLogPPL for volumes whose slots also end in a
	// write-log area of partial-parity records (volume format 3,
	// layout.Geometry.Log: a crash mid-write plus a lost shard loses no
	// acknowledged byte), empty for volumes without (formats 1 and 2,
	// which open as before, unprotected). It needs Checksum. Builds that
	// predate the field refuse the record, so they never write such a
	// volume without its records.
	WriteLog string `json:"write_log,omitempty"`
	// ChecksumSeed, when not zero, binds every stored checksum to its
	// place (volume format 4, layout.Geometry.Seed): the stored value is
	// the block's crc32c xor a tag of this seed, the segment, the slot in
	// the segment and the block in the slot, so a blank, holed or swapped
	// region fails its checks and is rebuilt instead of read as data. A
	// random value chosen when the volume is created (VolumeSpec.
	// BindChecksums); it needs Checksum. Zero for formats 1 to 3, which
	// open as before and are not converted. Builds that predate the field
	// refuse the record, so they never write such a volume unbound.
	ChecksumSeed uint64 `json:"checksum_seed,omitempty"`
}

// ChecksumCRC32C is Layout.Checksum for a crc32c per 4 KiB block.
const ChecksumCRC32C = "crc32c"

// WriteLogPPL is Layout.WriteLog for a partial-parity write log.
const WriteLogPPL = "ppl"

// Geometry is the volume engine's geometry of the layout on slots of
// slotSize bytes: the one place a layout becomes offsets.
func (l Layout) Geometry(slotSize int64) layout.Geometry {
	return layout.Geometry{K: l.K, M: l.M, Chunk: l.Chunk, SlotSize: slotSize,
		Checksums: l.Checksum == ChecksumCRC32C, Log: l.WriteLog == WriteLogPPL, Seed: l.ChecksumSeed}
}

// Format describes the layout's on-disk format for people.
func (l Layout) Format() string {
	if l.ChecksumSeed != 0 && l.WriteLog == WriteLogPPL {
		return "format 4: crc32c per 4 KiB block bound to its place, partial-parity write log"
	}
	if l.ChecksumSeed != 0 {
		return "format 4: crc32c per 4 KiB block bound to its place"
	}
	if l.WriteLog == WriteLogPPL {
		return "format 3: crc32c per 4 KiB block, partial-parity write log"
	}
	if l.Checksum == ChecksumCRC32C {
		return "format 2: crc32c per 4 KiB block"
	}
	return "format 1: no checksums"
}

// Limits of a layout (the volume engine's limits).
const (
	MinChunk  = 4 << 10
	MaxChunk  = 4 << 20
	MaxShards = 32
)

// Check validates the layout against a slot size: K >= 1, M >= 0,
// K+M <= MaxShards, Chunk a power of two in [MinChunk, MaxChunk] dividing
// the slot size.
func (l Layout) Check(slotSize int64) error {
	switch {
	case l.K < 1 || l.M < 0 || l.K+l.M > MaxShards:
		return fmt.Errorf("layout k=%d m=%d: need k >= 1, m >= 0, k+m <= %d: %w", l.K, l.M, MaxShards, ErrInvalid)
	case l.Chunk < MinChunk || l.Chunk > MaxChunk || bits.OnesCount64(uint64(l.Chunk)) != 1:
		return fmt.Errorf("chunk %d: must be a power of two from 4KiB to 4MiB: %w", l.Chunk, ErrInvalid)
	case slotSize > 0 && slotSize%l.Chunk != 0:
		return fmt.Errorf("chunk %d does not divide the slot size %d: %w", l.Chunk, slotSize, ErrInvalid)
	case l.Checksum != "" && l.Checksum != ChecksumCRC32C:
		return fmt.Errorf("checksum %q: this build knows %q or none: %w", l.Checksum, ChecksumCRC32C, ErrInvalid)
	case l.WriteLog != "" && l.WriteLog != WriteLogPPL:
		return fmt.Errorf("write log %q: this build knows %q or none: %w", l.WriteLog, WriteLogPPL, ErrInvalid)
	case l.WriteLog != "" && l.Checksum == "":
		return fmt.Errorf("write log %q needs checksums: %w", l.WriteLog, ErrInvalid)
	case l.ChecksumSeed != 0 && l.Checksum == "":
		return fmt.Errorf("checksum seed needs checksums: %w", ErrInvalid)
	case slotSize > 0 && l.Geometry(slotSize).Validate() != nil:
		return fmt.Errorf("layout on slots of %d bytes: %w: %w", slotSize, l.Geometry(slotSize).Validate(), ErrInvalid)
	}
	return nil
}

// Volume states.
const (
	VolumeReady    = "ready"
	VolumeDeleting = "deleting"
)

// VolumeRecord is a volume.
type VolumeRecord struct {
	versioned
	Name               string `json:"name"`
	Size               int64  `json:"size"` // bytes, a multiple of BlockSize
	Layout             Layout `json:"layout"`
	AllowSharedDomains bool   `json:"allow_shared_domains,omitempty"`
	State              string `json:"state"`
	// QoS limits the volume's IO wherever it is mapped (absent: none).
	QoS QoS `json:"qos,omitzero"`
}

// BlockSize is the logical block size of volumes; sizes are multiples of it.
const BlockSize = 4096

// CheckVolumeName says why name cannot name a volume (nil when it can):
// 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit.
// Class ErrInvalid.
func CheckVolumeName(name string) error { return checkName("volume", name) }

// CheckHolderName says why name cannot name an owner or a controller
// (OwnerOptions.Holder, Campaign), as CheckVolumeName.
func CheckHolderName(name string) error { return checkName("holder", name) }

func (v *VolumeRecord) check() error {
	if err := checkName("volume", v.Name); err != nil {
		return err
	}
	if v.Size <= 0 || v.Size%BlockSize != 0 {
		return fmt.Errorf("size %d: must be a positive multiple of %d bytes", v.Size, BlockSize)
	}
	if v.State != VolumeReady && v.State != VolumeDeleting {
		return fmt.Errorf("unknown volume state %q", v.State)
	}
	if err := v.QoS.Check(); err != nil {
		return err
	}
	return v.Layout.Check(0)
}

// SlotRef names one slot: a namespace and the slot's index in it (its byte
// offset in the namespace is Slot*SlotSize). It has the shape of the volume
// engine's SlotRef.
type SlotRef struct {
	NS   string `json:"ns"`
	Slot int64  `json:"slot"`
}

func (r SlotRef) check() error {
	if r.NS == "" || r.Slot < 1 {
		return fmt.Errorf("slot %s/%d: need a namespace and a slot >= 1", r.NS, r.Slot)
	}
	return nil
}

// MoveRecord is an in-flight move of one shard. Before commit Slots[Shard]
// is the old slot and To the reserved new one; CommitMove points
// Slots[Shard] at To and keeps the old slot reserved in From until
// FinishMove releases it.
type MoveRecord struct {
	Shard int      `json:"shard"`
	To    SlotRef  `json:"to"`
	From  *SlotRef `json:"from,omitempty"`
}

// Committed reports whether the move's new placement is recorded.
func (m *MoveRecord) Committed() bool { return m.From != nil }

// SegmentRecord is the placement of one segment: Slots[i] holds shard slot i.
type SegmentRecord struct {
	versioned
	Slots []SlotRef   `json:"slots"`
	Ver   int64       `json:"ver"` // grows with every change of Slots
	Move  *MoveRecord `json:"move,omitempty"`
}

func (s *SegmentRecord) check() error {
	if len(s.Slots) < 1 || len(s.Slots) > MaxShards || s.Ver < 1 {
		return fmt.Errorf("segment with %d slots, version %d", len(s.Slots), s.Ver)
	}
	for _, r := range s.Slots {
		if err := r.check(); err != nil {
			return err
		}
	}
	if m := s.Move; m != nil {
		if m.Shard < 0 || m.Shard >= len(s.Slots) {
			return fmt.Errorf("move of shard %d in a segment of %d", m.Shard, len(s.Slots))
		}
		if err := m.To.check(); err != nil {
			return err
		}
		if m.From != nil {
			return m.From.check()
		}
	}
	return nil
}

// DirtyRecord marks a segment dirty; Epoch is the owner epoch that marked it.
type DirtyRecord struct {
	versioned
	Epoch int64 `json:"epoch"`
}

func (d *DirtyRecord) check() error { return nil }

// Owner modes.
const (
	ModeRW = "rw"
	ModeRO = "ro"
)

// OwnerRecord is a volume owner, stored under the owner's lease.
type OwnerRecord struct {
	versioned
	Holder string `json:"holder"`
	Mode   string `json:"mode"`
	// Mover (read-write only): the owner only moves shards and repairs
	// slots, which does not change the volume's data, so read-only owners
	// may hold their leases beside it (OwnerOptions.Mover).
	Mover bool `json:"mover,omitempty"`
	// Applied (read-only only): the etcd revision up to which this reader
	// has applied the volume's segment map (Owner.SetApplied): it reads no
	// slot that a move committed at or before it moved away from.
	Applied int64 `json:"applied,omitempty"`
	// Host, PID and Since: the owner's host name, process ID and the time
	// (its clock) it took the volume, for the error that tells others who
	// holds it. Absent from records written before they were kept.
	Host  string    `json:"host,omitempty"`
	PID   int       `json:"pid,omitempty"`
	Since time.Time `json:"since,omitzero"`
}

func (o *OwnerRecord) check() error {
	switch {
	case o.Mode != ModeRW && o.Mode != ModeRO:
		return fmt.Errorf("unknown owner mode %q", o.Mode)
	case o.Mover && o.Mode != ModeRW:
		return errors.New("a read-only owner marked mover")
	case o.Applied != 0 && o.Mode != ModeRO || o.Applied < 0:
		return fmt.Errorf("applied revision %d on a %s owner", o.Applied, o.Mode)
	case o.PID < 0:
		return fmt.Errorf("owner pid %d", o.PID)
	}
	return checkName("holder", o.Holder)
}

// Task states.
const (
	TaskRunning = "running"
	TaskDone    = "done"
	TaskFailed  = "failed"
)

// TaskScrub is the kind of a scrub task: the volume's read-write owner
// (Holder) checks every stripe against its checksums and parity and heals
// what it can; Done and Total count segments, so a restarted owner resumes.
const TaskScrub = "scrub"

// ScrubTaskID is the id of volume's scrub task (one at a time per volume).
func ScrubTaskID(volume string) string { return "scrub-" + volume }

// TaskMove is the kind of a shard move task (a rebuild, drain or rebalance
// move of one segment's shard, TaskRecord.Move): the controller records it
// and Holder, the volume's owner or the controller, carries it out; Done and
// Total count bytes of shard data.
const TaskMove = "move"

// TaskRebalance is the kind of an operator's request to even out capacity
// use (`admin rebalance --apply`) down to TaskRecord.Threshold.
const TaskRebalance = "rebalance"

// ShardMove is what a move task (TaskMove) moves: shard Shard of segment
// Segment of the task's volume, from namespace From to a new slot on To,
// for Kind (rebuild, drain or rebalance), started at Started (Unix
// milliseconds).
type ShardMove struct {
	Kind    string `json:"kind"`
	Segment int64  `json:"segment"`
	Shard   int    `json:"shard"`
	From    string `json:"from"`
	To      string `json:"to"`
	Started int64  `json:"started"`
}

// TaskRecord is the progress of a long-running job (rebuild, drain, ...).
//
// Builds before Move and Threshold were fields wrote a move task's
// parameters as words in Kind ("move KIND seg=INDEX shard=N from=NS to=NS
// start=UNIXMILLI", "rebalance threshold=FRACTION"); the controller still
// reads those and rewrites them in this form (controller.MigrateTasks).
type TaskRecord struct {
	versioned
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Volume string `json:"volume,omitempty"`
	Holder string `json:"holder,omitempty"`
	Done   int64  `json:"done"`
	Total  int64  `json:"total"`
	State  string `json:"state"`
	Error  string `json:"error,omitempty"`
	// Move: the parameters of a move task (Kind TaskMove); zero in other
	// tasks.
	Move ShardMove `json:"move,omitzero"`
	// Threshold (Kind TaskRebalance): the largest acceptable spread of
	// used/capacity between namespaces in service, as a fraction.
	Threshold float64 `json:"threshold,omitempty"`
	// Scrub results, counting only what the scrub read itself: blocks
	// found bad (not matching their checksums, or matching them but not
	// the rest of their row), and of those healed; parity chunks found
	// out of step with their stripe's data (all checksums good) and
	// rewritten; when the task ended (RFC 3339, empty while running).
	Found  int64  `json:"found,omitempty"`
	Healed int64  `json:"healed,omitempty"`
	Parity int64  `json:"parity,omitempty"`
	Ended  string `json:"ended,omitempty"`
	// Unsettled (scrub): blocks known unsettled that it passed over, not
	// counted in Found (`nvstripe volume settle` resets them).
	Unsettled int64 `json:"unsettled,omitempty"`
	// Unhealed (scrub): of Found, the blocks left bad (Found = Healed +
	// Unhealed); reads of them fail.
	Unhealed int64 `json:"unhealed,omitempty"`
}

func (t *TaskRecord) check() error {
	if err := checkName("task", t.ID); err != nil {
		return err
	}
	switch {
	case t.Kind == "":
		return errors.New("task without kind")
	case t.Done < 0 || t.Total < 0 || t.Found < 0 || t.Healed < 0 || t.Parity < 0 || t.Unsettled < 0 || t.Unhealed < 0:
		return fmt.Errorf("task progress %d/%d, found %d, healed %d, unhealed %d, parity %d, unsettled %d", t.Done, t.Total, t.Found, t.Healed, t.Unhealed, t.Parity, t.Unsettled)
	case t.State != TaskRunning && t.State != TaskDone && t.State != TaskFailed:
		return fmt.Errorf("unknown task state %q", t.State)
	case t.Move != (ShardMove{}) && t.Kind != TaskMove:
		return fmt.Errorf("move parameters in a task of kind %q", t.Kind)
	case t.Move.Segment < 0 || t.Move.Shard < 0:
		return fmt.Errorf("move of segment %d shard %d", t.Move.Segment, t.Move.Shard)
	case t.Threshold != 0 && t.Kind != TaskRebalance:
		return fmt.Errorf("threshold in a task of kind %q", t.Kind)
	}
	return nil
}
