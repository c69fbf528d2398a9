package volclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/faultnet"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/placement"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
)

// silentListener accepts connections and never answers: a target that
// hangs in the handshake.
func silentListener(t *testing.T) string {
	t.Helper()
	return testutil.Serve(t, func(c net.Conn) { t.Cleanup(func() { c.Close() }) })
}

// TestDeviceDialsWithCallersContext: while namespace "hang" is being dialled
// (its target never answers), another namespace resolves; cancelling the
// caller's context ends the dial, and the namespace is not kept as
// unreachable (the next caller dials again).
func TestDeviceDialsWithCallersContext(t *testing.T) {
	ctx := context.Background()
	s, _, _, good := newServedNamespace(t)
	if _, err := s.AddNamespace(ctx, meta.NamespaceSpec{ID: "hang", Host: "h0", NQN: "nqn.test:hang", NSID: 1, Size: 8 << 20,
		Paths: []meta.PathRecord{{Addr: "tcp://" + silentListener(t)}}}); err != nil {
		t.Fatal(err)
	}
	n, err := NewNamespaces(ctx, s, NamespaceOptions{ConnectTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dialCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := n.Device(dialCtx, "hang"); done <- err }()
	if _, err := n.Device(ctx, good.ID); err != nil {
		t.Fatalf("another namespace while one is dialled: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the hanging dial returned before its context ended: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled dial: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the dial ignores its caller's context")
	}
	if d := n.known("hang"); d != nil {
		t.Errorf("a cancelled dial left %T kept for the namespace", d)
	}
}

// TestProbeConcurrentKeepsOneDevice: probes of one namespace that come back
// at once keep one connected device; the others close theirs, so that once
// the set is closed the target has no connection left (a leaked device
// keeps its queues open).
func TestProbeConcurrentKeepsOneDevice(t *testing.T) {
	ctx := context.Background()
	mem, err := blockdev.NewMem(8<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tgt := volclienttest.StartTarget(t, 0, "127.0.0.1:0", mem)
	px, err := faultnet.New(tgt.Addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	s := newClusterStore(t)
	rec, err := AddNamespace(ctx, s, meta.NamespaceSpec{Host: "h0", NQN: volclienttest.NQN(0), NSID: 1,
		Paths: []meta.PathRecord{{Addr: "tcp://" + px.Addr()}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	px.Partition()
	n, err := NewNamespaces(ctx, s, NamespaceOptions{ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Device(ctx, rec.ID); err != nil {
		t.Fatalf("an unreachable namespace: %v, want a stand-in", err)
	}
	px.Heal()
	const probes = 8
	errs := make(chan error, probes)
	start := make(chan struct{})
	for range probes {
		go func() { <-start; errs <- n.Probe(ctx, rec.ID) }()
	}
	close(start)
	for range probes {
		if err := <-errs; err != nil {
			t.Errorf("probe after the heal: %v", err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second) // a hang guard
	for tgt.Stats().Connections > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open at the target after Close: a probe's device leaked", tgt.Stats().Connections)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBadLabelIsMissingShard: a 2+1 volume over three namespaces, one of
// whose labels is then zeroed, overwritten with garbage or replaced by
// another cluster's: the volume opens, every byte reads back (rebuilt
// from the other two), a write succeeds degraded, the namespace is never
// written to, and it is reported: logged and marked failed in etcd
// (`ns ls`, `admin status`). A blank one (a replaced disk) is then
// refused by `ns add`, naming `admin fail` (it holds slots), and still not
// written to. Before, every read failed (the label error was returned for
// the namespace instead of counting it missing).
func TestBadLabelIsMissingShard(t *testing.T) {
	bad := map[string]func(c *meta.ClusterRecord) []byte{
		"zeros":   func(*meta.ClusterRecord) []byte { return make([]byte, meta.LabelSize) },
		"garbage": func(*meta.ClusterRecord) []byte { return bytes.Repeat([]byte("junk"), meta.LabelSize/4) },
		"another cluster": func(c *meta.ClusterRecord) []byte {
			l := c.Label("h1-n1")
			l.ClusterID = "another"
			b, err := meta.EncodeLabel(l)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	for name, label := range bad {
		t.Run(name, func(t *testing.T) { testBadLabel(t, label) })
	}
}

func testBadLabel(t *testing.T, label func(c *meta.ClusterRecord) []byte) {
	ctx := context.Background()
	s := storetest.OpenMem(t, metatest.Mem(t), meta.Config{})
	c := storetest.Init(t, s, meta.InitOptions{SlotSize: 1 << 20})
	var mems [3]*blockdev.Mem
	for i := range mems {
		var err error
		if mems[i], err = blockdev.NewMem(8<<20, 4096); err != nil {
			t.Fatal(err)
		}
		volclienttest.ServeNamespace(t, s, c, i, mems[i])
	}
	const size = 2 << 20
	if _, err := s.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size, Layout: meta.Layout{K: 2, M: 1, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("nvstripe"), size/8)
	for i := range data {
		data[i] ^= byte(i / 4096)
	}
	var logs testutil.Buffer
	o := testOpenOptions("w")
	o.Namespaces.Logf = logs.Logf
	m, err := OpenVolume(ctx, s, "v", o)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Volume.WriteAt(ctx, data, 0); err == nil {
		err = m.Volume.Flush(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	if err := mems[1].WriteAt(ctx, label(c), 0); err != nil {
		t.Fatal(err)
	}
	before := make([]byte, mems[1].Size())
	if err := mems[1].ReadAt(ctx, before, 0); err != nil {
		t.Fatal(err)
	}
	m, err = OpenVolume(ctx, s, "v", o)
	if err != nil {
		t.Fatalf("opening with one bad label of three (2+1): %v", err)
	}
	defer m.Close(ctx)
	got := make([]byte, size)
	if err := m.Volume.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reading with one bad label: %v (equal %v)", err, bytes.Equal(got, data))
	}
	copy(data[4096:], bytes.Repeat([]byte{7}, 4096))
	if err := m.Volume.WriteAt(ctx, data[4096:8192], 4096); err != nil {
		t.Fatalf("degraded write: %v", err)
	}
	if err := m.Volume.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reading after the degraded write: %v (equal %v)", err, bytes.Equal(got, data))
	}
	after := make([]byte, mems[1].Size())
	if err := mems[1].ReadAt(ctx, after, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the namespace with the bad label was written to")
	}
	if rec, err := s.Namespace(ctx, "h1-n1"); err != nil || rec.State != placement.StateFailed.String() {
		t.Errorf("h1-n1 in etcd: %+v, %v; want state failed", rec, err)
	}
	if l := logs.String(); !strings.Contains(l, "[ERR] namespace h1-n1") || !strings.Contains(l, "label") {
		t.Errorf("log %q: want an [ERR] line about h1-n1's label", l)
	}
	if _, err := meta.DecodeLabel(before); !errors.Is(err, meta.ErrNoLabel) {
		return
	}
	// A blank label: a replaced disk, as far as anyone can tell. `ns add`
	// refuses it, naming the steps for a namespace that holds slots.
	rec, err := s.Namespace(ctx, "h1-n1")
	if err != nil {
		t.Fatal(err)
	}
	spec := meta.NamespaceSpec{Host: rec.Host, NQN: rec.NQN, NSID: rec.NSID, Paths: rec.Paths}
	if _, err := AddNamespace(ctx, s, spec, ""); !errors.Is(err, meta.ErrExists) || !strings.Contains(err.Error(), "nvstripe admin fail h1-n1") {
		t.Errorf("ns add of the blank disk at h1-n1: %v; want ErrExists naming `admin fail h1-n1`", err)
	}
	if err := mems[1].ReadAt(ctx, after, 0); err != nil || !bytes.Equal(before, after) {
		t.Errorf("ns add of the blank disk wrote to it (%v)", err)
	}
}

// TestNamespaceOptionsCheckLimits: Check refuses a count or timeout that
// the initiator refuses for every connection (blockdev.ErrInvalid, naming
// the option and what to give), and only those: Connect's initiator
// refuses its options for exactly the cases Check refuses. The old Check
// took them all, and then every namespace failed to connect.
func TestNamespaceOptionsCheckLimits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // a path that refuses at once
	rec := &meta.NamespaceRecord{NQN: "nqn.2014-08.org.nvstripe:check", NSID: 1, Paths: []meta.PathRecord{{Addr: "tcp://" + ln.Addr().String()}}}
	for _, c := range []struct {
		o    NamespaceOptions
		want string // "": taken
	}{
		{NamespaceOptions{IOQueues: -1}, "IOQueues -1: give 1 to 128, or 0 for the default, 2"},
		{NamespaceOptions{IOQueues: 129}, "IOQueues 129: give 1 to 128"},
		{NamespaceOptions{ControllerLossTimeout: -time.Second}, "ControllerLossTimeout -1s: negative: give 0 (the default, 5s) or more"},
		{NamespaceOptions{ConnectTimeout: -1}, "ConnectTimeout -1ns: negative: give 0 (the default, 5s) or more"},
		{NamespaceOptions{}, ""},
		{NamespaceOptions{IOQueues: 128, ControllerLossTimeout: 1, ConnectTimeout: time.Second}, ""},
	} {
		err := c.o.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.o, err)
		case c.want != "" && (!errors.Is(err, blockdev.ErrInvalid) || !strings.Contains(fmt.Sprint(err), c.want)):
			t.Errorf("%+v: %v, want blockdev.ErrInvalid saying %q", c.o, err, c.want)
		}
		d, cerr := Connect(context.Background(), rec, c.o)
		if d != nil {
			d.Close()
		}
		if refused := errors.Is(cerr, blockdev.ErrInvalid); refused != (c.want != "") {
			t.Errorf("%+v: Check says %v, the initiator %v", c.o, err, cerr)
		}
	}
}
