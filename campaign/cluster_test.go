package campaign

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	numTargets = 4
	volName    = "v"
	volSize    = 32 << 20
)

// cluster is the campaign's processes.
type cluster struct {
	t       *testing.T
	bin     string
	etcdURL string
	logw    io.Writer
	etcd    *proc
	targets []*proc
	ctl     *proc
	owner   *proc // the foreground map serving the volume
	nbdAddr string
}

// startCluster starts etcd, the targets (registered as hosts h0..h3 with one
// namespace each), a 2+1 volume, the controller and the map.
func startCluster(t *testing.T, bin, dir string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: bin, logw: logFile(t, dir)}
	t.Logf("process logs: %s", filepath.Join(dir, "processes.log"))
	etcdAddr := freePort(t)
	c.etcdURL = etcdAddr
	c.etcd = c.newProc("etcd", "etcd ready", "etcd", "--dir", filepath.Join(dir, "etcd"), "--listen", etcdAddr, "--peer-listen", freePort(t))
	c.mustStart(c.etcd, 30*time.Second)
	c.admin("cluster", "init", "--slot-size", "1MiB")
	for i := range numTargets {
		host, addr := fmt.Sprintf("h%d", i), freePort(t)
		nqn := "nqn.2026-12.io.nvstripe:campaign-" + host
		p := c.newProc("target-"+host, "ready", "target", "serve", "--dir", filepath.Join(dir, host), "--listen", addr,
			"--nqn", nqn, "--ns", "d0:64MiB", "--allow-host", "any")
		c.mustStart(p, 30*time.Second)
		c.targets = append(c.targets, p)
		c.admin("host", "add", host)
		c.admin("ns", "add", "--host", host, "--nqn", nqn, "--nsid", "1", "--path", "tcp://"+addr)
	}
	c.admin("volume", "create", volName, "--size", fmt.Sprint(volSize), "--k", "2", "--m", "1")
	c.ctl = c.newProc("controller", "controller", "controller", "--interval", "200ms", "--grace", "2s", "--holder", "campaign-ctl", "--api", "")
	c.mustStart(c.ctl, 30*time.Second)
	c.nbdAddr = freePort(t)
	c.owner = c.newProc("map", "serving: ", "map", volName, "--nbd-listen", c.nbdAddr, "--holder", "campaign-map")
	c.startOwner()
	t.Cleanup(c.killAll)
	return c
}

func (c *cluster) newProc(name, ready string, args ...string) *proc {
	args = append(args, "--etcd", c.etcdURL)
	if args[0] == "etcd" {
		args = args[:len(args)-2] // etcd takes --listen, not --etcd
	}
	return &proc{name: name, bin: c.bin, args: args, ready: ready, logw: c.logw}
}

func (c *cluster) mustStart(p *proc, wait time.Duration) {
	c.t.Helper()
	if err := p.start(wait); err != nil {
		c.t.Fatal(err)
	}
}

// startOwner starts the map, retrying while the lease of a killed one is
// still held in etcd (up to its TTL).
func (c *cluster) startOwner() {
	c.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := c.owner.start(60 * time.Second)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("map: %v", err)
		}
		time.Sleep(time.Second)
	}
}

// admin runs an nvstripe command against the cluster and returns stdout.
func (c *cluster) admin(args ...string) string {
	c.t.Helper()
	out, err := c.tryAdmin(args...)
	if err != nil {
		c.t.Fatalf("nvstripe %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *cluster) tryAdmin(args ...string) (string, error) {
	cmd := exec.Command(c.bin, append(args, "--etcd", c.etcdURL, "--timeout", "20s")...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return string(out) + errb.String(), err
	}
	return string(out), nil
}

// heal brings every process back: continues stopped ones and restarts
// dead ones.
func (c *cluster) heal() {
	c.t.Helper()
	for _, p := range append([]*proc{c.etcd, c.ctl}, c.targets...) {
		p.cont()
		if !p.running() {
			c.mustStart(p, 60*time.Second)
		}
	}
	c.owner.cont()
	if !c.owner.running() {
		c.startOwner()
	}
}

// volumeHealth is the volume's health as `admin status` reports it.
func (c *cluster) volumeHealth() (string, error) {
	out, err := c.tryAdmin("admin", "status", "--json")
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	var st struct {
		Volumes []struct {
			Volume string `json:"volume"`
			Health string `json:"health"`
			Stale  int32  `json:"stale"`
			Moving int32  `json:"moving"`
		} `json:"volumes"`
		Tasks   []json.RawMessage `json:"tasks"`
		Blocked []string          `json:"blocked"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return "", fmt.Errorf("admin status --json: %v\n%s", err, out)
	}
	for _, v := range st.Volumes {
		if v.Volume == volName {
			// Healthy with no task or blocked shard left behind.
			if v.Health == "healthy" && v.Stale == 0 && v.Moving == 0 && len(st.Tasks) == 0 && len(st.Blocked) == 0 {
				return "healthy", nil
			}
			return fmt.Sprintf("%s, %d stale, %d moving, %d tasks, blocked %v", v.Health, v.Stale, v.Moving, len(st.Tasks), st.Blocked), nil
		}
	}
	return "", fmt.Errorf("volume %s missing from admin status", volName)
}

// waitHealthy waits until the controller reports the volume healthy.
func (c *cluster) waitHealthy(within time.Duration) error {
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		h, err := c.volumeHealth()
		if err == nil && h == "healthy" {
			return nil
		}
		last = h
		if err != nil {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("volume not healthy within %v: %s", within, last)
}

func (c *cluster) killAll() {
	for _, p := range append([]*proc{c.owner, c.ctl}, c.targets...) {
		p.kill()
	}
	c.etcd.kill()
}
