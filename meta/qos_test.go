package meta

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestVolumeQoS: limits given at create are in the record; SetVolumeQoS
// changes only the fields given (0 removes a limit), a watcher of the record
// sees the change, and a bad limit is refused and changes nothing.
func TestVolumeQoS(t *testing.T) {
	s := setup(t, 3, 1, 4)
	ctx := testCtx(t)
	_, err := s.CreateVolume(ctx, VolumeSpec{Name: "v", Size: 2 * testSlot, Layout: Layout{K: 2, M: 1, Chunk: 4096},
		QoS: QoS{IOPS: 2000, WriteBPS: 100 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	v, rev, err := s.VolumeRev(ctx, "v")
	if err != nil || v.QoS != (QoS{IOPS: 2000, WriteBPS: 100 << 20}) {
		t.Fatalf("created: %+v, %v", v.QoS, err)
	}
	events := s.WatchVolume(ctx, "v", rev)
	zero, iops, burst := int64(0), int64(500), int64(250)
	v, err = s.SetVolumeQoS(ctx, "v", QoSChange{IOPS: &iops, WriteBPS: &zero, BurstMS: &burst})
	want := QoS{IOPS: 500, BurstMS: 250}
	if err != nil || v.QoS != want {
		t.Fatalf("set: %+v, %v; want %+v", v.QoS, err, want)
	}
	if ev := <-events; ev.Err != nil || ev.Record.QoS != want {
		t.Fatalf("watched: %+v", ev)
	}
	if got := want.String(); got != "iops=500 burst=250ms" {
		t.Errorf("String = %q", got)
	}
	neg := int64(-1)
	if _, err := s.SetVolumeQoS(ctx, "v", QoSChange{IOPS: &iops, ReadBPS: &neg}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "read_bps") {
		t.Fatalf("negative limit: %v, want ErrInvalid naming read_bps", err)
	}
	if v, _ := s.Volume(ctx, "v"); v.QoS != want {
		t.Fatalf("a refused change changed the record: %+v", v.QoS)
	}
	if _, err := s.SetVolumeQoS(ctx, "nope", QoSChange{IOPS: &iops}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing volume: %v", err)
	}
}

// TestVolumeQoSRecord: a volume without limits is written as before (no
// qos key), and a record with a bad limit does not decode.
func TestVolumeQoSRecord(t *testing.T) {
	v := &VolumeRecord{Name: "v", Size: 4096, Layout: Layout{K: 2, M: 1, Chunk: 4096}, State: VolumeReady}
	b, err := encode(v)
	if err != nil || strings.Contains(string(b), "qos") {
		t.Fatalf("record without limits: %s, %v", b, err)
	}
	v.QoS = QoS{ReadIOPS: 10}
	if b, _ = encode(v); !strings.Contains(string(b), `"qos":{"read_iops":10}`) {
		t.Fatalf("record with a limit: %s", b)
	}
	for _, bad := range []QoS{{BurstMS: 1 << 62}, {BurstMS: -1}, {IOPS: 1, BurstMS: MaxQoSBurst.Milliseconds() + 1}} {
		if err := bad.Check(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["qos"] = map[string]any{"iops": -5}
	bad, _ := json.Marshal(m)
	if err := decode("vol/v", bad, &VolumeRecord{}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("negative limit decoded: %v", err)
	}
}
