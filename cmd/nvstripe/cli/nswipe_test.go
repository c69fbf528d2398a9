package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
)

// TestNSWipeLabel is the operator's way through as commands: `ns add` with
// a mistyped host is refused and writes nothing, so the right command
// succeeds; a stray label (another cluster's here) makes `ns add` refuse,
// naming `ns wipe-label`, which needs --force for another cluster's label,
// prints what it wiped (-o json), and is refused once the namespace is
// recorded.
func TestNSWipeLabel(t *testing.T) {
	a := initCluster(t, "wipe")
	a.ok("added", "host", "add", "t2")
	addr, devs := startTarget(t)
	sub := func(nqn string, nsid string) []string {
		return []string{"--nqn", "nqn.2024-01.io.test:" + nqn, "--nsid", nsid, "--path", "tcp://" + addr}
	}
	a.fails(`host "t8" not found`, append([]string{"ns", "add", "--host", "t8"}, sub("sub-a", "1")...)...)
	b := make([]byte, meta.LabelSize)
	if err := devs["a1"].ReadAt(context.Background(), b, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.DecodeLabel(b); err != meta.ErrNoLabel {
		t.Fatalf("after ns add --host t8: %v, want no label written", err)
	}
	a.ok("namespace t2-n1 added", append([]string{"ns", "add", "--host", "t2"}, sub("sub-a", "1")...)...)

	stray, err := meta.EncodeLabel(meta.Label{ClusterID: "old-cluster", Namespace: "t8-n1", SlotSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := devs["b1"].WriteAt(context.Background(), stray, 0); err != nil {
		t.Fatal(err)
	}
	addB := append([]string{"ns", "add", "--host", "t2", "--id", "t2-b1"}, sub("sub-b", "1")...)
	a.fails("ns wipe-label", addB...)
	a.fails("--force", append([]string{"ns", "wipe-label"}, sub("sub-b", "1")...)...)
	var w volclient.WipedLabel
	out := a.ok(`"namespace": "t8-n1"`, append([]string{"ns", "wipe-label", "--force", "-o", "json"}, sub("sub-b", "1")...)...)
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.ClusterID != "old-cluster" || w.NSID != 1 {
		t.Fatalf("wipe-label -o json: %q: %+v, %v", out, w, err)
	}
	a.ok("namespace t2-b1 added", addB...)
	a.fails("is recorded as namespace", append([]string{"ns", "wipe-label", "--force"}, sub("sub-b", "1")...)...)
	a.fails("needs --nqn", "ns", "wipe-label", "--nsid", "1")
}
