package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Entry flags of dm-log-writes.
const (
	FlagFlush    = 1 << 0
	FlagFUA      = 1 << 1
	FlagDiscard  = 1 << 2
	FlagMark     = 1 << 3
	FlagMetadata = 1 << 4
)

const (
	logMagic   = 0x6a736677736872
	logVersion = 1
	headerLen  = 32 // sector, sector count, flags, data length: four little-endian uint64
	chunk      = 1 << 20
)

// ErrFormat classes a log that is not a well-formed dm-log-writes log.
var ErrFormat = errors.New("not a well-formed dm-log-writes log")

// Log is an opened log: its super block, checked.
type Log struct {
	r          io.ReaderAt
	size       int64 // bytes of the log device
	entries    uint64
	sectorSize int64
}

// Entry is one record of the log.
type Entry struct {
	Index   uint64
	Sector  uint64 // first sector written, in the log's sector size
	Sectors uint64
	Flags   uint64
	Mark    string // the name of a mark entry
	data    int64  // where the entry's data starts in the log
}

func (e Entry) String() string {
	var f []string
	for _, n := range []struct {
		bit  uint64
		name string
	}{{FlagFlush, "FLUSH"}, {FlagFUA, "FUA"}, {FlagDiscard, "DISCARD"}, {FlagMark, "MARK"}, {FlagMetadata, "METADATA"}} {
		if e.Flags&n.bit != 0 {
			f = append(f, n.name)
		}
	}
	s := fmt.Sprintf("%d sector=%d sectors=%d flags=%s", e.Index, e.Sector, e.Sectors, strings.Join(f, "|"))
	if e.Flags&FlagMark != 0 {
		s += " mark=" + e.Mark
	}
	return s
}

// Open reads and checks the super block of the log in r, which holds size
// bytes.
func Open(r io.ReaderAt, size int64) (*Log, error) {
	var sb [28]byte
	if _, err := r.ReadAt(sb[:], 0); err != nil {
		return nil, fmt.Errorf("super block: %w", err)
	}
	if m := binary.LittleEndian.Uint64(sb[0:]); m != logMagic {
		return nil, fmt.Errorf("magic %#x, want %#x: %w", m, logMagic, ErrFormat)
	}
	if v := binary.LittleEndian.Uint64(sb[8:]); v != logVersion {
		return nil, fmt.Errorf("version %d, want %d: %w", v, logVersion, ErrFormat)
	}
	l := &Log{r: r, size: size, entries: binary.LittleEndian.Uint64(sb[16:]),
		sectorSize: int64(binary.LittleEndian.Uint32(sb[24:]))}
	if ss := l.sectorSize; ss < 512 || ss > 65536 || ss&(ss-1) != 0 {
		return nil, fmt.Errorf("sector size %d is not a power of two from 512 to 65536: %w", ss, ErrFormat)
	}
	if fit := uint64(size / l.sectorSize); l.entries >= fit {
		return nil, fmt.Errorf("%d entries cannot fit in %d bytes: %w", l.entries, size, ErrFormat)
	}
	return l, nil
}

// Scan calls fn with each entry in order, stopping at fn's first error.
func (l *Log) Scan(fn func(Entry) error) error {
	pos := l.sectorSize
	hdr := make([]byte, l.sectorSize)
	for i := range l.entries {
		if pos > l.size-l.sectorSize {
			return fmt.Errorf("entry %d at byte %d: past the end of the log (%d bytes): %w", i, pos, l.size, ErrFormat)
		}
		if _, err := l.r.ReadAt(hdr, pos); err != nil {
			return fmt.Errorf("entry %d at byte %d: %w", i, pos, err)
		}
		e, err := l.parse(i, hdr)
		if err != nil {
			return fmt.Errorf("entry %d at byte %d: %w", i, pos, err)
		}
		pos += l.sectorSize
		e.data = pos
		if e.Flags&FlagDiscard == 0 {
			if e.Sectors > uint64(l.size-pos)/uint64(l.sectorSize) {
				return fmt.Errorf("entry %d: %d sectors of data past the end of the log: %w", i, e.Sectors, ErrFormat)
			}
			pos += int64(e.Sectors) * l.sectorSize
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// parse decodes the header sector of entry i.
func (l *Log) parse(i uint64, hdr []byte) (Entry, error) {
	e := Entry{Index: i, Sector: binary.LittleEndian.Uint64(hdr[0:]), Sectors: binary.LittleEndian.Uint64(hdr[8:]),
		Flags: binary.LittleEndian.Uint64(hdr[16:])}
	dataLen := binary.LittleEndian.Uint64(hdr[24:])
	switch {
	case e.Flags == 0 && e.Sectors == 0:
		return e, fmt.Errorf("an empty header: %w", ErrFormat)
	case e.Flags&^(FlagFlush|FlagFUA|FlagDiscard|FlagMark|FlagMetadata) != 0:
		return e, fmt.Errorf("unknown flags %#x: %w", e.Flags, ErrFormat)
	case e.Flags&FlagMark == 0 && dataLen != 0:
		return e, fmt.Errorf("%d bytes of inline data outside a mark: %w", dataLen, ErrFormat)
	case e.Flags&FlagMark != 0 && dataLen > uint64(len(hdr)-headerLen):
		return e, fmt.Errorf("a mark name of %d bytes in a %d-byte sector: %w", dataLen, len(hdr), ErrFormat)
	case e.Sector > (1<<63)/uint64(l.sectorSize) || e.Sectors > (1<<63)/uint64(l.sectorSize)-e.Sector:
		return e, fmt.Errorf("sectors %d+%d out of range: %w", e.Sector, e.Sectors, ErrFormat)
	}
	if e.Flags&FlagMark != 0 {
		e.Mark = strings.TrimRight(string(hdr[headerLen:headerLen+int(dataLen)]), "\x00")
	}
	return e, nil
}

// Replay writes to dst every write and discard (as zeros) logged before the
// first mark named endMark, and returns how many entries came before it.
// It fails, having written nothing, when the log has no such mark.
func (l *Log) Replay(dst io.WriterAt, endMark string) (uint64, error) {
	var end uint64
	found := false
	errFound := errors.New("found")
	err := l.Scan(func(e Entry) error {
		if e.Flags&FlagMark != 0 && e.Mark == endMark {
			end, found = e.Index, true
			return errFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no mark %q in the log", endMark)
	}
	buf := make([]byte, chunk)
	err = l.Scan(func(e Entry) error {
		if e.Index == end {
			return errFound
		}
		return l.apply(dst, e, buf)
	})
	if err != nil && !errors.Is(err, errFound) {
		return 0, err
	}
	return end, nil
}

// apply writes entry e's data (zeros for a discard) to dst, a chunk at a
// time through buf.
func (l *Log) apply(dst io.WriterAt, e Entry, buf []byte) error {
	if e.Flags&FlagMark != 0 || e.Sectors == 0 {
		return nil
	}
	off, n := int64(e.Sector)*l.sectorSize, int64(e.Sectors)*l.sectorSize
	if e.Flags&FlagDiscard != 0 {
		clear(buf)
	}
	for done := int64(0); done < n; {
		b := buf[:min(int64(len(buf)), n-done)]
		if e.Flags&FlagDiscard == 0 {
			if _, err := l.r.ReadAt(b, e.data+done); err != nil {
				return fmt.Errorf("entry %d data: %w", e.Index, err)
			}
		}
		if _, err := dst.WriteAt(b, off+done); err != nil {
			return fmt.Errorf("entry %d: %w", e.Index, err)
		}
		done += int64(len(b))
	}
	return nil
}
