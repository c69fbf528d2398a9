package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// demoTarget is one userspace NVMe/TCP target with one file-backed namespace.
type demoTarget struct {
	host string
	nqn  string
	file *blockdev.File
	tgt  *target.Target
}

func targetNQN(i int) string { return fmt.Sprintf("nqn.2026-11.io.nvstripe:demo-target%d", i) }

// startTarget creates (or reopens) dir/target<i>/ns1.img of nsSize bytes and
// serves it on a free 127.0.0.1 port.
func startTarget(ctx context.Context, dir string, i int, nsSize int64) (*demoTarget, error) {
	tdir := filepath.Join(dir, fmt.Sprintf("target%d", i))
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		return nil, err
	}
	f, err := blockdev.OpenFile(filepath.Join(tdir, "ns1.img"), &blockdev.FileOptions{Size: nsSize, Sparse: true, Grow: true})
	if err != nil {
		return nil, err
	}
	t := &demoTarget{host: fmt.Sprintf("host%d", i), nqn: targetNQN(i), file: f}
	t.tgt, err = target.New(target.Config{
		Subsystems: []target.SubsystemConfig{{
			NQN:          t.nqn,
			Namespaces:   []target.NamespaceConfig{{NSID: 1, Device: f}},
			AllowedHosts: []string{initiator.DefaultHostNQN},
		}},
		Listeners:   []target.ListenerConfig{{Address: "127.0.0.1:0"}},
		MaxIOQueues: 4,
	})
	if err == nil {
		err = t.tgt.Start(ctx)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("target %d: %w", i, err)
	}
	return t, nil
}

func (t *demoTarget) addr() string { return t.tgt.Addr(0) }

// stop closes the target's listeners and connections (a dead storage host).
func (t *demoTarget) stop() error { return t.tgt.Close() }

func (t *demoTarget) close() error {
	return errors.Join(t.tgt.Close(), t.file.Close())
}
