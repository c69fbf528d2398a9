package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// noPoll are options whose mappings poll their volume's record once an
// hour: in a test, a resize that arrives came through the watch.
func noPoll(o Options) Options {
	o.sizePoll = time.Hour
	return o
}

// TestResizeReachesMapping: growing a mapped volume's record grows what the
// mapping serves, through the watch of the record (the poll is an hour
// away): List's size, a new NBD client's handshake, and IO past the old end
// (refused before). Once unmapped, no goroutine follows the record.
func TestResizeReachesMapping(t *testing.T) {
	e := newAgentEnv(t)
	ctx := context.Background()
	a := e.newAgent(t, noPoll(e.options(t, "")))
	m, dev := mapListen(t, a)
	addr := strings.TrimSuffix(strings.TrimPrefix(m.Url, "nbd://"), "/v")
	tail := randBytes(t, 4096)
	if err := dev.WriteAt(ctx, tail, envVolSize); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past the end before the resize: %v, want ErrOutOfRange", err)
	}
	waitWatching(t)
	const grown = 2 * envVolSize
	if _, err := e.store.ResizeVolume(ctx, "v", grown); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mapping to grow", func() bool { return a.List()[0].Size == grown && dev.Size() == grown })
	c, err := nbdtest.Dial(ctx, "tcp", addr, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Size() != grown {
		t.Fatalf("NBD handshake after the resize: size %d, want %d", c.Size(), grown)
	}
	if err := c.WriteAt(ctx, tail, envVolSize); err != nil {
		t.Fatalf("write past the old end over NBD: %v", err)
	}
	got := make([]byte, len(tail))
	if err := dev.ReadAt(ctx, got, envVolSize); err != nil || !bytes.Equal(got, tail) {
		t.Fatalf("read past the old end: %v, equal %v", err, bytes.Equal(got, tail))
	}
	c.Close()
	if running := sizeFollowers(); running == "" {
		t.Fatal("no goroutine follows the record of a mapped volume: the leak check below sees nothing")
	}
	if err := a.Unmap(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the record's followers to end after unmap", func() bool { return sizeFollowers() == "" })
}

// TestResizeReachesFUSE: once the mapping has told its FUSE mount of a
// resize, the file's stat shows the grown size at once, also when it was
// stat'ed before (the kernel keeps attributes a minute), and the file
// takes writes past the old end.
func TestResizeReachesFUSE(t *testing.T) {
	testutil.NeedFUSE(t)
	e := newAgentEnv(t)
	ctx := context.Background()
	o := noPoll(e.options(t, ""))
	logs := logTo(t, &o)
	a := e.newAgent(t, o)
	m, err := a.Map(ctx, Spec{Volume: "v", Via: ViaFUSE, Where: filepath.Join(t.TempDir(), "mnt")})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(m.Url); err != nil || fi.Size() != envVolSize { // the kernel keeps these attributes
		t.Fatalf("stat before the resize: %v, %v", fi, err)
	}
	const grown = 2 * envVolSize
	if _, err := e.store.ResizeVolume(ctx, "v", grown); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mapping to tell its mount", func() bool { return strings.Contains(logs.String(), "has the new size") })
	if fi, err := os.Stat(m.Url); err != nil || fi.Size() != grown {
		t.Fatalf("stat once the mount was told: %v, %v; want %d bytes", fi, err, grown)
	}
	f, err := os.OpenFile(m.Url, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tail := bytes.Repeat([]byte{0x5a}, 4096)
	if _, err := f.WriteAt(tail, envVolSize); err != nil {
		t.Fatalf("write past the old end: %v", err)
	}
	got := make([]byte, len(tail))
	if _, err := f.ReadAt(got, envVolSize); err != nil || !bytes.Equal(got, tail) {
		t.Fatalf("read past the old end: %v, equal %v", err, bytes.Equal(got, tail))
	}
}

// TestResizeAfterBrokenWatch: the first watch of the record starts from a
// revision etcd has compacted away, and a resize committed meanwhile is in
// no watch (compactingRecords). The watch fails; the mapping reads the
// record again (the missed resize arrives, with the poll an hour away) and
// watches anew (a later resize arrives too).
func TestResizeAfterBrokenWatch(t *testing.T) {
	e := newAgentEnv(t)
	ctx := context.Background()
	o := noPoll(e.options(t, ""))
	logs := logTo(t, &o)
	o.records = &compactingRecords{Store: e.store, t: t, env: e, size: 2 * envVolSize}
	a := e.newAgent(t, o)
	_, dev := mapListen(t, a)
	waitFor(t, "the resize the broken watch missed", func() bool { return dev.Size() == 2*envVolSize })
	if !strings.Contains(logs.String(), "following the volume record for resizes") {
		t.Fatalf("the watch did not break, nothing was tested; log:\n%s", logs)
	}
	if _, err := e.store.ResizeVolume(ctx, "v", 3*envVolSize); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a resize after the watch was made again", func() bool { return dev.Size() == 3*envVolSize })
}

// compactingRecords is the store, except that its first read of a record
// grows the volume to size after reading it and then compacts etcd past
// both: a watch from the read's revision fails, and only a new read sees
// the size.
type compactingRecords struct {
	*meta.Store
	t    *testing.T
	env  *agentEnv
	size int64
	once sync.Once
}

func (c *compactingRecords) VolumeRev(ctx context.Context, name string) (*meta.VolumeRecord, int64, error) {
	rec, rev, err := c.Store.VolumeRev(ctx, name)
	c.once.Do(func() {
		if _, err := c.Store.ResizeVolume(ctx, name, c.size); err != nil {
			c.t.Error(err)
		}
		c.env.compact(c.t)
	})
	return rec, rev, err
}

// TestResizeAfterOutageWithCompaction: the agent is cut off etcd while the
// volume is grown and etcd's history compacted, so that the watches it
// had end with an error once etcd is back (the record's, and the owner
// key's: the owner reads its key again and keeps the volume, same epoch).
// The resize made while it was cut off arrives, and so does a later one.
func TestResizeAfterOutageWithCompaction(t *testing.T) {
	e := newAgentEnvProxied(t)
	ctx := context.Background()
	o := noPoll(e.options(t, ""))
	o.Store = e.proxied // default lease TTL, 10s: outlives the cut
	logs := logTo(t, &o)
	a := e.newAgent(t, o)
	_, dev := mapListen(t, a)
	before := rwEpoch(t, e.store, "v")
	waitWatching(t)
	e.proxy.cut()
	if _, err := e.store.ResizeVolume(ctx, "v", 2*envVolSize); err != nil {
		t.Fatal(err)
	}
	e.compact(t)
	e.proxy.listen()
	waitFor(t, "the resize made while cut off", func() bool { return dev.Size() == 2*envVolSize })
	if _, err := e.store.ResizeVolume(ctx, "v", 3*envVolSize); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a later resize", func() bool { return dev.Size() == 3*envVolSize })
	if after := rwEpoch(t, e.store, "v"); after != before || strings.Contains(logs.String(), "fenced") {
		t.Fatalf("owner epoch %d before the outage, %d after; log:\n%s", before, after, logs)
	}
}

// rwEpoch returns the epoch of volume v's read-write owner.
func rwEpoch(t *testing.T, s *meta.Store, v string) int64 {
	t.Helper()
	owners, err := s.Owners(context.Background(), v)
	if err != nil || len(owners) != 1 {
		t.Fatalf("owners of %s: %+v, %v", v, owners, err)
	}
	return owners[0].Epoch
}

// waitWatching waits until the record of a mapped volume is watched:
// clientv3's Watch returns, and meta's goroutine runs, once etcd has
// created the watch. A resize committed after it comes through the watch,
// not the mapping's first read.
func waitWatching(t *testing.T) {
	t.Helper()
	waitFor(t, "the record's watch", func() bool { return strings.Contains(sizeFollowers(), "meta.watchKeys") })
}

// sizeFollowers returns the stacks of the goroutines that follow a
// volume's record (the mapping's loop and meta's watch), or "".
func sizeFollowers() string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "agent.(*mapping).followSize") || strings.Contains(g, "meta.watchKeys") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// logTo sends the log lines of an agent with options o to t and keeps
// them in the buffer it returns.
func logTo(t *testing.T, o *Options) *testutil.Buffer {
	logs := &testutil.Buffer{}
	tlog := testutil.Logf(t)
	o.Logf = func(format string, args ...any) {
		logs.Logf(format, args...)
		tlog(format, args...)
	}
	return logs
}
