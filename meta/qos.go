package meta

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/internal/units"
)

// QoS is a volume's IO limits, kept in its record so that every mapping of
// the volume applies them (package qos enforces them where the volume is
// served). A zero limit is no limit; the zero QoS limits nothing. IOPS
// limits count requests whatever their size; BPS limits count the bytes
// read or written. The total limits and those of one direction apply
// together: a read takes from IOPS and ReadIOPS, BPS and ReadBPS.
//
// Builds that predate the field refuse a record that has it (records are
// read strictly), so a volume with limits is never served unlimited by an
// older agent: it is refused until that agent is upgraded.
type QoS struct {
	IOPS      int64 `json:"iops,omitempty"`
	ReadIOPS  int64 `json:"read_iops,omitempty"`
	WriteIOPS int64 `json:"write_iops,omitempty"`
	BPS       int64 `json:"bps,omitempty"` // bytes a second
	ReadBPS   int64 `json:"read_bps,omitempty"`
	WriteBPS  int64 `json:"write_bps,omitempty"`
	// BurstMS is how long, in milliseconds, each limit may be used at once
	// after a pause: a bucket holds BurstMS of its limit. 0 means
	// DefaultQoSBurst.
	BurstMS int64 `json:"burst_ms,omitempty"`
}

// DefaultQoSBurst is the burst of a QoS whose BurstMS is 0: one second of
// each limit, as Ceph's rbd_qos_*_burst_seconds defaults to.
const DefaultQoSBurst = time.Second

// MaxQoSBurst bounds QoS.BurstMS (a minute).
const MaxQoSBurst = time.Minute

// Limited reports whether q limits anything.
func (q QoS) Limited() bool {
	return q.IOPS > 0 || q.ReadIOPS > 0 || q.WriteIOPS > 0 || q.BPS > 0 || q.ReadBPS > 0 || q.WriteBPS > 0
}

// Burst is q's burst as a duration (DefaultQoSBurst when BurstMS is 0).
func (q QoS) Burst() time.Duration {
	if q.BurstMS == 0 {
		return DefaultQoSBurst
	}
	return time.Duration(q.BurstMS) * time.Millisecond
}

// Check says what is wrong with q (class ErrInvalid): a negative limit or
// a burst outside 0..MaxQoSBurst.
func (q QoS) Check() error {
	for _, f := range q.fields() {
		if f.v < 0 {
			return fmt.Errorf("qos %s %d: a limit is 0 (none) or positive: %w", f.name, f.v, ErrInvalid)
		}
	}
	if q.BurstMS < 0 || q.BurstMS > MaxQoSBurst.Milliseconds() {
		return fmt.Errorf("qos burst %dms: must be from 0 (the default, %v) to %v: %w", q.BurstMS, DefaultQoSBurst, MaxQoSBurst, ErrInvalid)
	}
	return nil
}

type qosField struct {
	name  string
	v     int64
	bytes bool
}

func (q QoS) fields() []qosField {
	return []qosField{{"iops", q.IOPS, false}, {"read_iops", q.ReadIOPS, false}, {"write_iops", q.WriteIOPS, false},
		{"bps", q.BPS, true}, {"read_bps", q.ReadBPS, true}, {"write_bps", q.WriteBPS, true}}
}

// String renders q for people: "iops=2000 write_bps=100 MiB/s burst=1s",
// "-" when it limits nothing.
func (q QoS) String() string {
	var parts []string
	for _, f := range q.fields() {
		switch {
		case f.v == 0:
		case f.bytes:
			parts = append(parts, f.name+"="+units.FormatRate(f.v))
		default:
			parts = append(parts, fmt.Sprintf("%s=%d", f.name, f.v))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(append(parts, "burst="+q.Burst().String()), " ")
}

// QoSChange is a change of some of a volume's QoS fields: nil fields stay
// as they are.
type QoSChange struct {
	IOPS, ReadIOPS, WriteIOPS, BPS, ReadBPS, WriteBPS, BurstMS *int64
}

// Apply returns q with c's fields set.
func (c QoSChange) Apply(q QoS) QoS {
	for _, p := range []struct {
		to   *int64
		from *int64
	}{{&q.IOPS, c.IOPS}, {&q.ReadIOPS, c.ReadIOPS}, {&q.WriteIOPS, c.WriteIOPS}, {&q.BPS, c.BPS},
		{&q.ReadBPS, c.ReadBPS}, {&q.WriteBPS, c.WriteBPS}, {&q.BurstMS, c.BurstMS}} {
		if p.from != nil {
			*p.to = *p.from
		}
	}
	return q
}

// SetVolumeQoS changes the QoS of volume name by c and returns the record
// written. Every mapping of the volume follows its record and applies the
// new limits as soon as the change reaches it (agent: within a second). A
// volume being deleted is refused (ErrInvalid), as is a bad limit.
func (s *Store) SetVolumeQoS(ctx context.Context, name string, c QoSChange) (*VolumeRecord, error) {
	if _, _, err := s.volume(ctx, name); err != nil {
		return nil, err
	}
	var out *VolumeRecord
	err := update(ctx, s, s.keys.volume(name), func() *VolumeRecord { return &VolumeRecord{} }, func(v *VolumeRecord) error {
		if v.State != VolumeReady {
			return fmt.Errorf("volume %s is %s: %w", name, v.State, ErrInvalid)
		}
		q := c.Apply(v.QoS)
		if err := q.Check(); err != nil {
			return fmt.Errorf("volume %s: %w", name, err)
		}
		v.QoS, out = q, v
		return nil
	})
	return out, err
}
