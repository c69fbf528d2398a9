// Package volclienttest sets up, for tests, what an operator sets up by hand
// before a volume can be opened: a userspace NVMe/TCP target on 127.0.0.1
// serving a namespace, the host and namespace registered in etcd, and the
// namespace labelled for the cluster. Everything it starts stops when the
// test ends.
package volclienttest

import (
	"context"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// NQN is the subsystem NQN of test target i.
func NQN(i int) string { return fmt.Sprintf("nqn.2026-11.io.nvstripe:test-t%d", i) }

// StartTarget serves dev as namespace 1 of test target i's subsystem (NQN(i),
// open to initiator.DefaultHostNQN) on addr (port 0: any).
func StartTarget(t testing.TB, i int, addr string, dev blockdev.Device) *target.Target {
	t.Helper()
	tgt, err := target.New(target.Config{
		Subsystems: []target.SubsystemConfig{{NQN: NQN(i), Namespaces: []target.NamespaceConfig{{NSID: 1, Device: dev}},
			AllowedHosts: []string{initiator.DefaultHostNQN}}},
		Listeners: []target.ListenerConfig{{Address: addr}},
	})
	if err == nil {
		err = tgt.Start(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	return tgt
}

// ServeNamespace serves dev as namespace 1 of test target i on 127.0.0.1,
// registers host h<i> and namespace h<i>-n1 in etcd and labels it for
// cluster c: what `nvstripe target serve`, `host add` and `ns add` do by
// hand. The label is written to dev directly, as `ns add` writes it over
// the network.
func ServeNamespace(t testing.TB, store *meta.Store, c *meta.ClusterRecord, i int, dev blockdev.Device) (*target.Target, *meta.NamespaceRecord) {
	t.Helper()
	ctx := context.Background()
	tgt := StartTarget(t, i, "127.0.0.1:0", dev)
	rec := storetest.AddHost(t, store, nil, meta.NamespaceSpec{Host: fmt.Sprintf("h%d", i), NQN: NQN(i), NSID: 1, Size: dev.Size(),
		Paths: []meta.PathRecord{{Addr: "tcp://" + tgt.Addr(0), ANAGroup: 1, ANAState: meta.ANAOptimized}}})
	label, err := meta.EncodeLabel(c.Label(rec.ID))
	if err == nil {
		err = blockdev.WriteFUA(ctx, dev, label, 0)
	}
	if err != nil {
		t.Fatalf("labelling %s: %v", rec.ID, err)
	}
	return tgt, rec
}
