package layout

import (
	"errors"
	"testing"
)

// TestLogArea pins the format 3 slot layout: stripes, then the checksum
// area, then the write-log area; format 2 keeps no log area.
func TestLogArea(t *testing.T) {
	cases := []struct {
		g                  Geometry
		logArea, dataEnd   int64
		hdrBlocks, maxRecs int64
	}{
		// 1 GiB slot: the 1/256 share, 4 MiB.
		{Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 1 << 30, Checksums: true, Log: true}, 4 << 20, 1<<30 - 4<<20 - 1<<20, 1, 33},
		// 1 MiB slot of 64 KiB chunks: two records of the largest size (17 blocks), in chunks.
		{Geometry{K: 2, M: 1, Chunk: 64 << 10, SlotSize: 1 << 20, Checksums: true, Log: true}, 192 << 10, 1<<20 - 192<<10 - 64<<10, 1, 17},
		// small chunks: the 128 KiB floor.
		{Geometry{K: 3, M: 1, Chunk: 8 << 10, SlotSize: 256 << 10, Checksums: true, Log: true}, 128 << 10, 256<<10 - 128<<10 - 8<<10, 1, 3},
		// format 2: no log area.
		{Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 1 << 30, Checksums: true}, 0, 1<<30 - 1<<20, 1, 33},
	}
	for _, c := range cases {
		if err := c.g.Validate(); err != nil {
			t.Fatalf("%v: %v", c.g, err)
		}
		if c.g.LogArea() != c.logArea || c.g.DataEnd() != c.dataEnd || c.g.LogOffset() != c.g.SlotSize-c.logArea {
			t.Errorf("%v: log area %d at %d, data end %d; want %d, %d", c.g, c.g.LogArea(), c.g.LogOffset(), c.g.DataEnd(), c.logArea, c.dataEnd)
		}
		if c.g.LogHeaderBlocks(c.g.BlocksPerChunk()) != c.hdrBlocks || c.g.LogRecordMax() != c.maxRecs {
			t.Errorf("%v: header %d blocks, largest record %d", c.g, c.g.LogHeaderBlocks(c.g.BlocksPerChunk()), c.g.LogRecordMax())
		}
		if c.g.ChecksumOffset(c.g.StripesPerSegment()-1, c.g.Chunk-ChecksumBlock)+ChecksumSize > c.g.SlotSize-c.logArea {
			t.Errorf("%v: checksums run into the log area", c.g)
		}
	}
	bad := Geometry{K: 2, M: 1, Chunk: 4096, SlotSize: 1 << 20, Log: true}
	if err := bad.Validate(); !errors.Is(err, ErrGeometry) {
		t.Errorf("a log without checksums: Validate() = %v, want ErrGeometry", err)
	}
}
