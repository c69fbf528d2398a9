package volclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
)

func newClusterStore(t *testing.T) *meta.Store {
	t.Helper()
	s := storetest.OpenMem(t, metatest.Mem(t), meta.Config{})
	storetest.Init(t, s, meta.InitOptions{SlotSize: 1 << 20})
	if _, err := s.AddHost(context.Background(), "h0", nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// newMem returns a blank 8 MiB in-memory device.
func newMem(t *testing.T) *blockdev.Mem {
	t.Helper()
	mem, err := blockdev.NewMem(8<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

// newBlankNamespace serves a blank 8 MiB in-memory namespace over NVMe/TCP
// (target 0, not recorded) and returns the device, its target and the spec
// that adds it on host h0.
func newBlankNamespace(t *testing.T) (*blockdev.Mem, *target.Target, meta.NamespaceSpec) {
	t.Helper()
	mem := newMem(t)
	tgt := volclienttest.StartTarget(t, 0, "127.0.0.1:0", mem)
	spec := meta.NamespaceSpec{Host: "h0", NQN: volclienttest.NQN(0), NSID: 1, Paths: []meta.PathRecord{{Addr: "tcp://" + tgt.Addr(0)}}}
	return mem, tgt, spec
}

// newServedNamespace is newClusterStore with one 8 MiB in-memory namespace
// served over NVMe/TCP and recorded on host h0.
func newServedNamespace(t *testing.T) (*meta.Store, *meta.ClusterRecord, *target.Target, *meta.NamespaceRecord) {
	t.Helper()
	s := newClusterStore(t)
	c, err := s.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mem := newMem(t)
	tgt, rec := volclienttest.ServeNamespace(t, s, c, 1, mem)
	return s, c, tgt, rec
}

// TestAddNamespaceLabels: a blank namespace is recorded at its size and
// labelled for the cluster; another cluster refuses it; a path where
// nothing answers is a ConnectError; Discover finds the namespace recorded.
func TestAddNamespaceLabels(t *testing.T) {
	ctx := context.Background()
	mem, tgt, spec := newBlankNamespace(t)
	s := newClusterStore(t)
	rec, err := AddNamespace(ctx, s, spec, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckLabel(ctx, mem, c.Label(rec.ID)); err != nil || rec.Size != 8<<20 {
		t.Errorf("recorded %d bytes; label: %v", rec.Size, err)
	}
	if _, err := AddNamespace(ctx, newClusterStore(t), spec, ""); !errors.Is(err, meta.ErrLabelMismatch) {
		t.Errorf("another cluster adding a labelled namespace: %v", err)
	}
	bad := spec
	bad.Paths = []meta.PathRecord{{Addr: "tcp://127.0.0.1:1"}}
	if _, err := AddNamespace(ctx, s, bad, ""); !errors.As(err, new(*ConnectError)) {
		t.Errorf("nothing answering: %v, want a ConnectError", err)
	}
	var seen []Discovered
	n, err := Discover(ctx, s, "tcp://"+tgt.Addr(0), "h0", NamespaceOptions{}, 4, false, func(d Discovered) { seen = append(seen, d) })
	if err != nil || n != 1 || len(seen) != 1 || seen[0].Known != rec.ID {
		t.Errorf("Discover: %d subsystems, %+v, %v", n, seen, err)
	}
	all, err := DiscoverAll(ctx, s, "tcp://"+tgt.Addr(0), "h0", NamespaceOptions{}, 4, false, nil)
	if err != nil || all.Subsystems != 1 || len(all.Added) != 0 || len(all.Known) != 1 || all.Known[0] != rec.ID {
		t.Errorf("DiscoverAll: %+v, %v", all, err)
	}
	if js, _ := json.Marshal(all); !strings.Contains(string(js), `"added":[]`) {
		t.Errorf("DiscoverAll JSON %s: want an empty added list, not null", js)
	}
}

// TestDiscoverTwoSubsystems: a host exporting two subsystems, each with
// nsid 1, gets both recorded (HOST-n1, then one named after the second
// subsystem), each labelled with its own id; a rerun adds nothing and
// reports both as recorded; `ns add` without an id for the second refuses
// the taken default id, asking for --id, before labelling anything.
func TestDiscoverTwoSubsystems(t *testing.T) {
	ctx := context.Background()
	var mems [2]*blockdev.Mem
	var subs []target.SubsystemConfig
	for i := range mems {
		var err error
		if mems[i], err = blockdev.NewMem(8<<20, 4096); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, target.SubsystemConfig{NQN: volclienttest.NQN(i), AllowedHosts: []string{initiator.DefaultHostNQN},
			Namespaces: []target.NamespaceConfig{{NSID: 1, Device: mems[i]}}})
	}
	tgt, err := target.New(target.Config{Subsystems: subs, Listeners: []target.ListenerConfig{{Address: "127.0.0.1:0"}}})
	if err == nil {
		err = tgt.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	addr := "tcp://" + tgt.Addr(0)

	s := newClusterStore(t)
	c, err := s.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := DiscoverAll(ctx, s, addr, "h0", NamespaceOptions{}, 4, true, nil)
	if err != nil || rep.Subsystems != 2 || len(rep.Added) != 2 {
		t.Fatalf("DiscoverAll: %+v, %v; want 2 subsystems, 2 added", rep, err)
	}
	want := []string{"h0-n1", "h0-test-t1-n1"}
	for i, rec := range rep.Added {
		if rec.ID != want[i] || rec.NQN != volclienttest.NQN(i) || rec.NSID != 1 {
			t.Errorf("added %d: %s %s nsid %d, want %s %s nsid 1", i, rec.ID, rec.NQN, rec.NSID, want[i], volclienttest.NQN(i))
		}
		if err := CheckLabel(ctx, mems[i], c.Label(want[i])); err != nil {
			t.Errorf("subsystem %d label: %v", i, err)
		}
	}
	again, err := DiscoverAll(ctx, s, addr, "h0", NamespaceOptions{}, 4, true, nil)
	if err != nil || len(again.Added) != 0 || strings.Join(again.Known, ",") != strings.Join(want, ",") {
		t.Errorf("rerun: %+v, %v; want %v already recorded", again, err, want)
	}

	fresh := newClusterStore(t)
	first := meta.NamespaceSpec{Host: "h0", NQN: volclienttest.NQN(0), NSID: 1, Size: 8 << 20, Paths: []meta.PathRecord{{Addr: addr}}}
	if _, err := fresh.AddNamespace(ctx, first); err != nil {
		t.Fatal(err)
	}
	blank := newMem(t)
	second := first
	second.NQN, second.Size = volclienttest.NQN(1), 0
	tgt2 := volclienttest.StartTarget(t, 1, "127.0.0.1:0", blank)
	second.Paths = []meta.PathRecord{{Addr: "tcp://" + tgt2.Addr(0)}}
	_, err = AddNamespace(ctx, fresh, second, "")
	if !errors.Is(err, meta.ErrExists) || !strings.Contains(err.Error(), "--id") {
		t.Errorf("ns add of a second subsystem's nsid 1 without --id: %v; want ErrExists asking for --id", err)
	}
	fc, err := fresh.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckLabel(ctx, blank, fc.Label("h0-n1")); !errors.Is(err, meta.ErrNoLabel) {
		t.Errorf("refused namespace's label: %v; want none written", err)
	}
	second.ID = "h0-b-n1"
	if rec, err := AddNamespace(ctx, fresh, second, ""); err != nil || rec.ID != second.ID {
		t.Errorf("ns add --id %s: %+v, %v", second.ID, rec, err)
	}
}

// checkNothingBehind fails t if the namespace on mem carries a label or
// etcd holds a record of nqn nsid 1.
func checkNothingBehind(t *testing.T, s *meta.Store, mem blockdev.Device, nqn, what string) {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, meta.LabelSize)
	if err := mem.ReadAt(ctx, b, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.DecodeLabel(b); !errors.Is(err, meta.ErrNoLabel) {
		t.Errorf("%s: the namespace's label block is not blank (%v)", what, err)
	}
	if n, err := s.NamespaceAt(ctx, nqn, 1); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("%s: etcd holds %+v, %v; want no record", what, n, err)
	}
}

// TestAddNamespaceMistakesLeaveNothing: `ns add` with a mistyped host,
// NQN, nsid or path (the only one, or a second one that reaches another
// target), or on a namespace too small to hold a slot, is refused and
// leaves nothing behind (no label, no record); the right command then
// succeeds. Before every argument was checked first, a mistyped host (and
// a namespace too small) left a label naming the wrong id, and the right
// command was refused for good; a mistyped second path was recorded.
func TestAddNamespaceMistakesLeaveNothing(t *testing.T) {
	ctx := context.Background()
	mem, _, right := newBlankNamespace(t)
	small, err := blockdev.NewMem(1<<20, 4096) // one 1 MiB slot: the label's only
	if err != nil {
		t.Fatal(err)
	}
	tiny := volclienttest.StartTarget(t, 1, "127.0.0.1:0", small)
	other := volclienttest.StartTarget(t, 2, "127.0.0.1:0", small)
	s := newClusterStore(t)
	mistakes := map[string]func(*meta.NamespaceSpec){
		"host": func(sp *meta.NamespaceSpec) { sp.Host = "h8" },
		"nqn":  func(sp *meta.NamespaceSpec) { sp.NQN = volclienttest.NQN(9) },
		"nsid": func(sp *meta.NamespaceSpec) { sp.NSID = 2 },
		"path": func(sp *meta.NamespaceSpec) { sp.Paths = []meta.PathRecord{{Addr: "tcp://" + silentListener(t)}} },
		"second path": func(sp *meta.NamespaceSpec) {
			sp.Paths = []meta.PathRecord{sp.Paths[0], {Addr: "tcp://" + other.Addr(0)}} // a target without this subsystem
		},
	}
	for name, mistype := range mistakes {
		sp := right
		mistype(&sp)
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second) // a silent path answers nothing
		_, err := AddNamespace(cctx, s, sp, "")
		cancel()
		if err == nil {
			t.Fatalf("mistyped %s: added", name)
		}
		checkNothingBehind(t, s, mem, right.NQN, "mistyped "+name)
	}
	tooSmall := meta.NamespaceSpec{Host: "h0", NQN: volclienttest.NQN(1), NSID: 1, Paths: []meta.PathRecord{{Addr: "tcp://" + tiny.Addr(0)}}}
	if _, err := AddNamespace(ctx, s, tooSmall, ""); !errors.Is(err, meta.ErrInvalid) {
		t.Errorf("a namespace of one slot: %v, want ErrInvalid", err)
	}
	checkNothingBehind(t, s, small, tooSmall.NQN, "too small")
	if _, err := AddNamespace(ctx, s, right, ""); err != nil {
		t.Fatalf("the right command after the mistakes: %v", err)
	}
}

// TestAddNamespaceReplacedDisk: a blank disk answering as a recorded
// namespace (its NQN and NSID) is refused, naming the steps (ns rm first),
// and left blank: it holds none of the recorded namespace's data. Once the
// old record is removed, the same command adds it. Before, the label was
// written and the add then failed "already recorded".
func TestAddNamespaceReplacedDisk(t *testing.T) {
	ctx := context.Background()
	_, tgt, spec := newBlankNamespace(t)
	s := newClusterStore(t)
	rec, err := AddNamespace(ctx, s, spec, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AddNamespace(ctx, s, spec, ""); !errors.Is(err, meta.ErrExists) || !strings.Contains(err.Error(), "nothing to do") {
		t.Errorf("adding a recorded, labelled namespace again: %v; want ErrExists saying there is nothing to do", err)
	}
	tgt.Close()
	blank := newMem(t)
	spec.Paths = []meta.PathRecord{{Addr: "tcp://" + volclienttest.StartTarget(t, 0, "127.0.0.1:0", blank).Addr(0)}}
	_, err = AddNamespace(ctx, s, spec, "")
	if !errors.Is(err, meta.ErrExists) || !strings.Contains(err.Error(), "carries no label") || !strings.Contains(err.Error(), "nvstripe ns rm "+rec.ID) {
		t.Errorf("ns add on a replaced blank disk: %v; want ErrExists naming `ns rm %s`", err, rec.ID)
	}
	b := make([]byte, meta.LabelSize)
	if err := blank.ReadAt(ctx, b, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.DecodeLabel(b); !errors.Is(err, meta.ErrNoLabel) {
		t.Errorf("the replaced disk's label block after the refusal: %v, want blank", err)
	}
	if err := s.RemoveNamespace(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := AddNamespace(ctx, s, spec, ""); err != nil {
		t.Errorf("ns add after ns rm: %v", err)
	}
}

// TestAddNamespaceUndoesLabel: when the etcd transaction fails after the
// label was written (the host removed meanwhile), the label block is put
// back as it was (blank) and nothing is recorded; the add then succeeds
// once the host is back.
func TestAddNamespaceUndoesLabel(t *testing.T) {
	ctx := context.Background()
	mem, _, spec := newBlankNamespace(t)
	s := newClusterStore(t)
	var labelled error
	afterLabel = func() {
		c, err := s.Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		labelled = CheckLabel(ctx, mem, c.Label("h0-n1"))
		if _, err := s.RemoveHost(ctx, "h0", false); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { afterLabel = nil }()
	_, err := AddNamespace(ctx, s, spec, "")
	if !errors.Is(err, meta.ErrNotFound) || !strings.Contains(err.Error(), "taken off again") {
		t.Errorf("add whose record failed: %v; want the host's ErrNotFound, the label taken off", err)
	}
	if labelled != nil {
		t.Fatalf("the label was not written before the record: %v", labelled)
	}
	checkNothingBehind(t, s, mem, spec.NQN, "failed record")
	afterLabel = nil
	if _, err := s.AddHost(ctx, "h0", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := AddNamespace(ctx, s, spec, ""); err != nil {
		t.Errorf("add with the host back: %v", err)
	}
}

// TestWipeLabel: a stray label of this cluster (an id not recorded), left
// by an earlier add, makes `ns add` refuse, naming wipe-label; WipeLabel
// clears it, saying whose it was, and the add then succeeds. WipeLabel
// refuses a recorded namespace, a label whose id is recorded, another
// cluster's label without force, a blank block and other data, changing
// nothing.
func TestWipeLabel(t *testing.T) {
	ctx := context.Background()
	mem, _, spec := newBlankNamespace(t)
	s := newClusterStore(t)
	c, err := s.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	put := func(b []byte) {
		t.Helper()
		if err := mem.WriteAt(ctx, b, 0); err != nil {
			t.Fatal(err)
		}
	}
	label := func(l meta.Label) []byte {
		t.Helper()
		b, err := meta.EncodeLabel(l)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	block := func() []byte {
		t.Helper()
		b := make([]byte, meta.LabelSize)
		if err := mem.ReadAt(ctx, b, 0); err != nil {
			t.Fatal(err)
		}
		return b
	}

	if _, err := WipeLabel(ctx, s, spec, NamespaceOptions{}, false); !errors.Is(err, meta.ErrNoLabel) {
		t.Errorf("wiping a blank namespace: %v, want ErrNoLabel", err)
	}
	other := bytes.Repeat([]byte{0xab}, meta.LabelSize)
	put(other)
	if _, err := WipeLabel(ctx, s, spec, NamespaceOptions{}, true); !errors.Is(err, meta.ErrLabelMismatch) || !bytes.Equal(block(), other) {
		t.Errorf("wiping other data with force: %v; want refused, the data kept", err)
	}
	foreign := label(meta.Label{ClusterID: "another", Namespace: "x-n1", SlotSize: 1 << 20})
	put(foreign)
	if _, err := WipeLabel(ctx, s, spec, NamespaceOptions{}, false); !errors.Is(err, meta.ErrLabelMismatch) || !bytes.Equal(block(), foreign) {
		t.Errorf("wiping another cluster's label without force: %v; want refused, kept", err)
	}
	if w, err := WipeLabel(ctx, s, spec, NamespaceOptions{}, true); err != nil || w.ClusterID != "another" || w.Namespace != "x-n1" {
		t.Errorf("wiping another cluster's label with force: %+v, %v", w, err)
	}

	if _, err := s.AddNamespace(ctx, meta.NamespaceSpec{ID: "h0-n7", Host: "h0", NQN: "nqn.test:elsewhere", NSID: 7, Size: 8 << 20,
		Paths: spec.Paths}); err != nil {
		t.Fatal(err)
	}
	inService := label(c.Label("h0-n7"))
	put(inService)
	if _, err := WipeLabel(ctx, s, spec, NamespaceOptions{}, true); !errors.Is(err, meta.ErrBusy) || !bytes.Equal(block(), inService) {
		t.Errorf("wiping the label of a recorded namespace id: %v; want ErrBusy, kept", err)
	}

	put(label(c.Label("h8-n1"))) // left by `ns add --host h8` before arguments were checked first
	_, err = AddNamespace(ctx, s, spec, "")
	if !errors.Is(err, meta.ErrLabelMismatch) || !strings.Contains(err.Error(), "ns wipe-label") {
		t.Errorf("ns add over a stray label: %v; want a mismatch naming ns wipe-label", err)
	}
	w, err := WipeLabel(ctx, s, spec, NamespaceOptions{}, false)
	if err != nil || w.ClusterID != c.ID || w.Namespace != "h8-n1" || w.SlotSize != c.SlotSize || w.Corrupt {
		t.Fatalf("wiping the stray label: %+v, %v", w, err)
	}
	if _, err := meta.DecodeLabel(block()); !errors.Is(err, meta.ErrNoLabel) {
		t.Errorf("after the wipe: %v, want a blank label block", err)
	}
	rec, err := AddNamespace(ctx, s, spec, "")
	if err != nil {
		t.Fatalf("ns add after the wipe: %v", err)
	}
	labelled := block()
	if _, err := WipeLabel(ctx, s, spec, NamespaceOptions{}, true); !errors.Is(err, meta.ErrBusy) || !bytes.Equal(block(), labelled) {
		t.Errorf("wiping recorded namespace %s: %v; want ErrBusy, kept", rec.ID, err)
	}
}

// TestDiscoverStrangerHost: a target's discovery log lists only the
// subsystems the host may connect to, so a host it does not allow finds
// none; Discover says so and what to do, instead of adding nothing
// silently.
func TestDiscoverStrangerHost(t *testing.T) {
	_, tgt, _ := newBlankNamespace(t)
	s := newClusterStore(t)
	const stranger = "nqn.2026-11.io.nvstripe:stranger"
	addr := "tcp://" + tgt.Addr(0)
	rep, err := DiscoverAll(context.Background(), s, addr, "h0", NamespaceOptions{HostNQN: stranger}, 4, true, nil)
	want := "discover " + addr + ": the discovery log lists no NVMe subsystem for host " + stranger
	if err == nil || !errors.Is(err, meta.ErrNotFound) || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "--allow-host "+stranger) {
		t.Fatalf("DiscoverAll as a stranger: %+v, %v; want %q and the fix", rep, err, want)
	}
	if ns, err := s.Namespaces(context.Background()); err != nil || len(ns) != 0 {
		t.Errorf("namespaces recorded: %v, %v", ns, err)
	}
}

// TestDiscoverTLSAndAuth: a target that requires TLS and DH-HMAC-CHAP is
// discovered only with the host's TLS key (discovery runs over TLS), and
// its namespaces are added only with the host's secret as well; each
// refusal records nothing.
func TestDiscoverTLSAndAuth(t *testing.T) {
	mem, err := blockdev.NewMem(8<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	psk, err := tlspsk.GenerateKey(rand.Reader, tlspsk.HashSHA256)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := auth.GenerateSecret(rand.Reader, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	host := initiator.DefaultHostNQN
	tgt, err := target.New(target.Config{
		Subsystems: []target.SubsystemConfig{{NQN: volclienttest.NQN(0), Namespaces: []target.NamespaceConfig{{NSID: 1, Device: mem}},
			HostKeys: []target.HostKey{{HostNQN: host, Secret: secret.String()}}}},
		Listeners: []target.ListenerConfig{{Address: "127.0.0.1:0"}},
		TLS:       target.TLSRequire,
		TLSKeys:   map[string]tlspsk.Key{host: psk},
	})
	if err == nil {
		err = tgt.Start(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	ctx := context.Background()
	s := newClusterStore(t)
	addr := "tcp://" + tgt.Addr(0)
	recorded := func() int {
		ns, err := s.Namespaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ns)
	}

	if _, err := DiscoverAll(ctx, s, addr, "h0", NamespaceOptions{}, 4, true, nil); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("discover without the TLS key: %v, want an error that names TLS", err)
	}
	withKey := NamespaceOptions{TLSKey: psk.String()}
	if _, err := DiscoverAll(ctx, s, addr, "h0", withKey, 4, true, nil); err == nil {
		t.Error("discover with the TLS key but without the DH-HMAC-CHAP secret added the namespace")
	} else if !strings.Contains(err.Error(), "DH-HMAC-CHAP") {
		t.Errorf("discover without the secret: %v, want an error that names DH-HMAC-CHAP", err)
	}
	if n := recorded(); n != 0 {
		t.Fatalf("%d namespaces recorded by refused discoveries", n)
	}
	withBoth := withKey
	withBoth.DHCHAPSecret = secret.String()
	rep, err := DiscoverAll(ctx, s, addr, "h0", withBoth, 4, true, nil)
	if err != nil || rep.Subsystems != 1 || len(rep.Added) != 1 {
		t.Fatalf("discover with the TLS key and the secret: %+v, %v; want 1 namespace added", rep, err)
	}
	c, err := s.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckLabel(ctx, mem, c.Label(rep.Added[0].ID)); err != nil {
		t.Errorf("label of the discovered namespace: %v", err)
	}
}
