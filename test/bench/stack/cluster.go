package main

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// cluster is the stack as a user runs it: `nvstripe etcd`, six `nvstripe
// target serve` processes with their namespace files under dir (tmpfs), and
// one foreground `nvstripe map --nbd-listen` per volume.
type cluster struct {
	bin, dir, etcd string
	log            io.Writer
	procs          []*proc
	targets        group
	// targetPprof is the --pprof address of the first target.
	targetPprof string
}

// numTargets is how many targets (one namespace each) the stack runs: a
// 4+2 volume needs six failure domains.
const numTargets = 6

// startCluster starts etcd and the targets, inits the cluster and adds
// the hosts and namespaces (nsSize each).
func startCluster(bin, dir string, log io.Writer, nsSize string) (*cluster, error) {
	c := &cluster{bin: bin, dir: dir, log: log}
	var err error
	if c.etcd, err = freeAddr(); err != nil {
		return c, err
	}
	peer, err := freeAddr()
	if err != nil {
		return c, err
	}
	if _, err := c.start("etcd", "etcd ready", "etcd", "--dir", filepath.Join(dir, "etcd"), "--listen", c.etcd, "--peer-listen", peer); err != nil {
		return c, err
	}
	if err := c.admin("cluster", "init"); err != nil {
		return c, err
	}
	for i := range numTargets {
		if err := c.addTarget(i, nsSize); err != nil {
			return c, err
		}
	}
	return c, nil
}

// addTarget starts target i and registers its host and namespace.
func (c *cluster) addTarget(i int, nsSize string) error {
	host := fmt.Sprintf("h%d", i)
	nqn := "nqn.2026-12.io.nvstripe:bench-" + host
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	pprof, err := freeAddr()
	if err != nil {
		return err
	}
	if err := c.admin("host", "add", host); err != nil {
		return err
	}
	p, err := c.start("target-"+host, "ready", "target", "serve", "--dir", filepath.Join(c.dir, host), "--listen", addr,
		"--nqn", nqn, "--ns", "d0:"+nsSize, "--allow-host", "any", "--pprof", pprof)
	if err != nil {
		return err
	}
	if i == 0 {
		c.targetPprof = pprof
	}
	c.targets = append(c.targets, p)
	return c.admin("ns", "add", "--host", host, "--nqn", nqn, "--nsid", "1", "--path", "tcp://"+addr)
}

// createVolume runs `volume create NAME --size SIZE` with the defaults
// (4+2, crc32c checksums, the write log) and any extra flags.
func (c *cluster) createVolume(name, size string, extra ...string) error {
	return c.admin(append([]string{"volume", "create", name, "--size", size}, extra...)...)
}

// mapping is a foreground `nvstripe map NAME --nbd-listen ADDR`.
type mapping struct {
	*proc
	uri   string // the NBD export: nbd://ADDR/NAME
	pprof string // its --pprof address
}

// mapVolume maps the volume as a user does, serving it on a free port.
func (c *cluster) mapVolume(name string) (*mapping, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pprof, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := c.start("map-"+name, "serving: ", "map", name, "--nbd-listen", addr, "--pprof", pprof)
	if err != nil {
		return nil, err
	}
	return &mapping{proc: p, uri: "nbd://" + addr + "/" + name, pprof: pprof}, nil
}

// start runs an nvstripe daemon against the cluster's etcd.
func (c *cluster) start(name, ready string, args ...string) (*proc, error) {
	if args[0] != "etcd" {
		args = append(args, "--etcd", c.etcd)
	}
	p, err := startProc(c.log, name, ready, time.Minute, c.bin, args...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// admin runs a one-shot nvstripe command against the cluster.
func (c *cluster) admin(args ...string) error {
	out, err := exec.Command(c.bin, append(args, "--etcd", c.etcd)...).CombinedOutput()
	fmt.Fprintf(c.log, "$ nvstripe %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		return fmt.Errorf("nvstripe %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// stop ends every process, the last started first (maps before targets,
// targets before etcd).
func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	c.procs = nil
}
