package meta

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkSegmentRecordSize writes realistic segment records (4+2 on
// 1,600 namespaces named like production ones, slot indexes up to 7,152)
// and reports etcd's backend bytes per segment key, then projects the key
// count and database size of 100 hosts x 16 namespaces x 7.68 TB fully
// allocated for several slot sizes. Run with -benchtime=1x.
func BenchmarkSegmentRecordSize(b *testing.B) {
	const n = 20000
	ctx := context.Background()
	s := newStore(b)
	cli := rawClient(b)
	for b.Loop() {
		before, beforeFile := dbInUse(b, cli)
		var raw int64
		for i := 0; i < n; i += maxTxnOps {
			ops := make([]clientv3.Op, 0, maxTxnOps)
			for j := i; j < i+maxTxnOps; j++ {
				rec := &SegmentRecord{Ver: 1}
				for sh := range 6 {
					rec.Slots = append(rec.Slots, SlotRef{NS: fmt.Sprintf("host%03d-n%d", (j*7+sh*17)%100, (j+sh)%16+1), Slot: int64(1 + (j*13+sh)%7151)})
				}
				key := s.keys.segment("checkpoints-2024", int64(j))
				op, err := putOp(key, rec)
				if err != nil {
					b.Fatal(err)
				}
				raw += int64(len(key) + len(op.ValueBytes()))
				ops = append(ops, op)
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				b.Fatal(err)
			}
		}
		after, afterFile := dbInUse(b, cli)
		perKey := float64(after-before) / n
		b.ReportMetric(float64(raw)/n, "raw-B/key")
		b.ReportMetric(perKey, "db-B/key")
		b.ReportMetric(float64(afterFile-beforeFile)/n, "file-B/key")
		logProjection(b, perKey)
	}
}

// dbInUse returns the etcd backend's size in use and its file size.
func dbInUse(b *testing.B, cli *clientv3.Client) (inUse, file int64) {
	st, err := cli.Status(context.Background(), cli.Endpoints()[0])
	if err != nil {
		b.Fatal(err)
	}
	return st.DbSizeInUse, st.DbSize
}

func logProjection(b *testing.B, perKey float64) {
	const nsSize, namespaces = 7.68e12, 100 * 16
	for _, slot := range []int64{256 << 20, 1 << 30, 2 << 30, 4 << 30, 8 << 30} {
		slots := int64(nsSize/float64(slot)) - 1 // slot 0 is the label
		for _, width := range []int64{6, 3} {
			segs := slots * namespaces / width
			bitmap := (slots+7)/8*4/3 + 60 // base64 bitmap + fields, one record per namespace
			b.Logf("slot %5s, k+m=%d: %9d segment keys, %6.0f MiB segments + %4.1f MiB bitmaps; allocation rewrites %5d B of bitmaps",
				fmtSize(slot), width, segs, float64(segs)*perKey/(1<<20), float64(bitmap*namespaces)/(1<<20), bitmap*width)
		}
	}
}

func fmtSize(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%dG", n>>30)
	}
	return fmt.Sprintf("%dM", n>>20)
}
