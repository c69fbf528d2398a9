package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// logBuilder writes a dm-log-writes log the way the kernel lays it out.
type logBuilder struct {
	ss      int
	entries [][]byte
}

func (b *logBuilder) add(sector, sectors, flags uint64, mark string, data []byte) {
	e := make([]byte, b.ss)
	binary.LittleEndian.PutUint64(e[0:], sector)
	binary.LittleEndian.PutUint64(e[8:], sectors)
	binary.LittleEndian.PutUint64(e[16:], flags)
	binary.LittleEndian.PutUint64(e[24:], uint64(len(mark)))
	copy(e[headerLen:], mark)
	b.entries = append(b.entries, append(e, data...))
}

func (b *logBuilder) write(sector uint64, data []byte) {
	b.add(sector, uint64(len(data)/b.ss), 0, "", data)
}
func (b *logBuilder) flush()             { b.add(0, 0, FlagFlush, "", nil) }
func (b *logBuilder) mark(name string)   { b.add(0, 0, FlagMark, name, nil) }
func (b *logBuilder) discard(s, n int64) { b.add(uint64(s), uint64(n), FlagDiscard, "", nil) }

func (b *logBuilder) bytes() []byte {
	sb := make([]byte, b.ss)
	binary.LittleEndian.PutUint64(sb[0:], logMagic)
	binary.LittleEndian.PutUint64(sb[8:], logVersion)
	binary.LittleEndian.PutUint64(sb[16:], uint64(len(b.entries)))
	binary.LittleEndian.PutUint32(sb[24:], uint32(b.ss))
	return append(sb, bytes.Join(b.entries, nil)...)
}

// device is an io.WriterAt over a fixed buffer.
type device []byte

func (d device) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(d)) {
		return 0, errors.New("write past the device")
	}
	return copy(d[off:], p), nil
}

func fill(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }

func sample() *logBuilder {
	b := &logBuilder{ss: 512}
	b.write(0, fill(1024, 'a'))
	b.write(4, fill(512, 'b'))
	b.flush()
	b.mark("one")
	b.write(1, fill(512, 'c'))
	b.discard(4, 1)
	b.add(2, 1, FlagFUA, "", fill(512, 'd'))
	b.mark("two")
	b.write(5, fill(512, 'e'))
	return b
}

// TestReplayToEachMark: the device holds exactly the entries before the
// mark, discards as zeros, and later entries are not applied.
func TestReplayToEachMark(t *testing.T) {
	raw := sample().bytes()
	l, err := Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"one": "aa" + "\x00\x00" + "b" + "\x00",
		"two": "acd" + "\x00\x00\x00",
	}
	for mark, blocks := range want {
		dev := make(device, 6*512)
		n, err := l.Replay(dev, mark)
		if err != nil {
			t.Fatalf("%s: %v", mark, err)
		}
		var got strings.Builder
		for i := 0; i < len(dev); i += 512 {
			c := dev[i]
			if !bytes.Equal(dev[i:i+512], fill(512, c)) {
				t.Fatalf("%s: block %d mixes bytes", mark, i/512)
			}
			got.WriteByte(c)
		}
		if got.String() != blocks {
			t.Errorf("%s: blocks %q, want %q", mark, got.String(), blocks)
		}
		if wantN := map[string]uint64{"one": 3, "two": 7}[mark]; n != wantN {
			t.Errorf("%s: %d entries before the mark, want %d", mark, n, wantN)
		}
	}
}

// TestScanListsEntries: every entry with its flags and mark name, in order.
func TestScanListsEntries(t *testing.T) {
	raw := sample().bytes()
	l, err := Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := l.Scan(func(e Entry) error { got = append(got, e.String()); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"0 sector=0 sectors=2 flags=", "1 sector=4 sectors=1 flags=", "2 sector=0 sectors=0 flags=FLUSH",
		"3 sector=0 sectors=0 flags=MARK mark=one", "4 sector=1 sectors=1 flags=", "5 sector=4 sectors=1 flags=DISCARD",
		"6 sector=2 sectors=1 flags=FUA", "7 sector=0 sectors=0 flags=MARK mark=two", "8 sector=5 sectors=1 flags=",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestBadLogs: a damaged log is refused with a clear error and the device
// is left untouched; nothing panics or allocates past the log's size.
func TestBadLogs(t *testing.T) {
	good := sample().bytes()
	set := func(off int, v uint64) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint64(b[off:], v)
		return b
	}
	entry := func(i int) int { // byte offset of sample's entry i (entries 0-3 hold 2, 1, 0, 0 data sectors)
		return 512 * []int{1, 4, 6, 7, 8}[i]
	}
	tests := []struct {
		name string
		raw  []byte
		mark string
		want string
	}{
		{"magic", set(0, 1), "one", "magic"},
		{"version", set(8, 2), "one", "version"},
		{"sector size", func() []byte { b := bytes.Clone(good); binary.LittleEndian.PutUint32(b[24:], 513); return b }(), "one", "sector size"},
		{"too many entries", set(16, 1<<40), "one", "cannot fit"},
		{"truncated data", good[:15*512], "three", "past the end"},
		{"data past the end", set(entry(1)+8, 1<<20), "one", "past the end"},
		{"empty header", set(entry(2)+16, 0), "two", "empty header"},
		{"unknown flag", set(entry(2)+16, 1<<9), "two", "unknown flags"},
		{"long mark", set(entry(3)+24, 600), "two", "mark name"},
		{"inline data", set(entry(0)+24, 8), "one", "inline data"},
		{"huge sector", set(entry(0), 1<<62), "one", "out of range"},
		{"no such mark", good, "three", `no mark "three"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev := make(device, 6*512)
			l, err := Open(bytes.NewReader(tt.raw), int64(len(tt.raw)))
			if err == nil {
				_, err = l.Replay(dev, tt.mark)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
			if tt.name != "no such mark" && !errors.Is(err, ErrFormat) {
				t.Errorf("error %v is not ErrFormat", err)
			}
			if !bytes.Equal(dev, make(device, len(dev))) {
				t.Error("the device was written although the log is bad")
			}
		})
	}
}

// FuzzReplay: any log is replayed or refused, never a panic, and never a
// write outside the sectors an entry names.
func FuzzReplay(f *testing.F) {
	f.Add(sample().bytes(), "one")
	f.Add(sample().bytes(), "two")
	f.Fuzz(func(t *testing.T, raw []byte, mark string) {
		l, err := Open(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			return
		}
		l.Replay(discardWriter{}, mark)
	})
}

type discardWriter struct{}

func (discardWriter) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
