package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/faultnet"
	"github.com/nvstripe/nvstripe/meta"
)

const (
	numTargets = 8
	rwVolume   = "v"  // mapped read-write by the owner, written by the workload
	roVolume   = "ro" // filled once, mapped read-only by the reader
	volSize    = 32 << 20
	roSize     = 16 << 20
	ownerName  = "campaign-map"
	readerName = "campaign-reader"
)

// cluster is the campaign's processes: etcd, the targets (each reached
// through its faultnet proxy: the namespace paths in etcd are the proxies'
// addresses; each gossips its health, which the controller judges it
// by), the controller, the owner (a foreground `map` of rwVolume
// over NBD) and the reader (a read-only `map` of roVolume over NBD).
type cluster struct {
	t       *testing.T
	bin     string
	etcdURL string
	logw    io.Writer
	etcd    *proc
	targets []*proc
	proxies []*faultnet.Proxy
	ctl     *proc
	store   *meta.Store // the campaign's own etcd client
	owner   *proc
	reader  *proc
	// ownerAddr and readerAddr are the NBD exports of owner and reader.
	ownerAddr, readerAddr string
	// fenced counts owners found alive but no longer holding the volume
	// (restarted by ensureOwner); slowStops counts processes that did not
	// end within stopWait of SIGTERM (then killed).
	fenced, slowStops int
	// returned counts namespaces marked out (their shards rebuilt) that
	// the campaign put back in service, as an operator does.
	returned int
	// knownLeaks are the leak findings of earlier rounds, reported once.
	knownLeaks map[string]bool
}

// outAfter is how long a namespace stays down before the controller marks
// it out and rebuilds its shards elsewhere (the gossip judges the targets:
// their paths in etcd are the proxies, which always accept).
const outAfter = 5 * time.Second

// stopWait is how long a process gets to end after SIGTERM.
const stopWait = 20 * time.Second

// startCluster starts etcd, the targets (registered as hosts h0..h7 with
// one namespace each, behind their proxies), the two 4+2 volumes, the
// controller, the owner and the reader; roVolume is filled with its
// content first through a read-write map.
func startCluster(t *testing.T, bin, dir string) *cluster {
	t.Helper()
	for _, src := range []netip.Addr{ownerSrc, ctlSrc} {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(src, 0).String())
		if err != nil {
			t.Skipf("the owner and the controller connect from %s and %s, which this host cannot bind (Linux has all of 127/8 on lo): %v", ownerSrc, ctlSrc, err)
		}
		ln.Close()
	}
	c := &cluster{t: t, bin: bin, logw: logFile(t, dir), knownLeaks: map[string]bool{}}
	t.Cleanup(c.killAll)
	t.Logf("process logs: %s", filepath.Join(dir, "processes.log"))
	c.etcdURL = freePort(t)
	c.etcd = c.newProc("etcd", "etcd ready", "etcd", "--dir", filepath.Join(dir, "etcd"), "--listen", c.etcdURL, "--peer-listen", freePort(t))
	c.mustStart(c.etcd, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if c.store, err = meta.Open(ctx, meta.Config{Endpoints: []string{c.etcdURL}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.store.Close() })
	c.admin("cluster", "init", "--slot-size", "1MiB")
	for i := range numTargets {
		c.addTarget(dir, i)
	}
	c.admin("volume", "create", rwVolume, "--size", fmt.Sprint(volSize), "--k", "4", "--m", "2")
	c.admin("volume", "create", roVolume, "--size", fmt.Sprint(roSize), "--k", "4", "--m", "2")
	c.ctl = c.newProc("controller", "controller", "controller", "--interval", "200ms", "--grace", "2s", "--out-after", outAfter.String(),
		"--holder", "campaign-ctl", "--gossip", "127.0.0.1:0", "--gossip-profile", "local", "--api", "", "--host-traddr", ctlSrc.String())
	c.mustStart(c.ctl, 30*time.Second)
	if err := c.fillReadOnly(); err != nil {
		t.Fatal(err)
	}
	c.ownerAddr, c.readerAddr = freePort(t), freePort(t)
	c.owner = c.newProc("owner", "serving: ", "map", rwVolume, "--nbd-listen", c.ownerAddr, "--holder", ownerName, "--host-traddr", ownerSrc.String())
	c.reader = c.newProc("reader", "serving: ", "map", roVolume, "--read-only", "--nbd-listen", c.readerAddr, "--holder", readerName)
	c.startMap(c.owner)
	c.startMap(c.reader)
	return c
}

// addTarget starts target i behind a proxy and registers it.
func (c *cluster) addTarget(dir string, i int) {
	host, addr := fmt.Sprintf("h%d", i), freePort(c.t)
	nqn := "nqn.2026-12.io.nvstripe:campaign-" + host
	c.admin("host", "add", host)
	p := c.newProc("target-"+host, "ready", "target", "serve", "--dir", filepath.Join(dir, host), "--listen", addr,
		"--nqn", nqn, "--ns", "d0:64MiB", "--allow-host", "any", "--host", host, "--gossip", "127.0.0.1:0", "--gossip-profile", "local")
	c.mustStart(p, 30*time.Second)
	px, err := faultnet.New(addr)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { px.Close() })
	c.targets, c.proxies = append(c.targets, p), append(c.proxies, px)
	c.admin("ns", "add", "--host", host, "--nqn", nqn, "--nsid", "1", "--path", "tcp://"+px.Addr())
}

// fillReadOnly writes roVolume's content through a read-write map (none
// other may map it).
func (c *cluster) fillReadOnly() error {
	addr := freePort(c.t)
	p := c.newProc("filler", "serving: ", "map", roVolume, "--nbd-listen", addr, "--holder", "campaign-filler")
	if err := c.tryStartMap(p); err != nil {
		return fmt.Errorf("filler: %w", err)
	}
	defer c.stop(p)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fill(ctx, addr); err != nil {
		return fmt.Errorf("filling %s: %w", roVolume, err)
	}
	return nil
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

// startMap starts a map, retrying while a killed one's lease is still
// held in etcd (up to its TTL) or etcd is coming back.
func (c *cluster) startMap(p *proc) {
	c.t.Helper()
	if err := c.tryStartMap(p); err != nil {
		c.t.Fatalf("%s: %v", p.name, err)
	}
}

func (c *cluster) tryStartMap(p *proc) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := p.start(60 * time.Second)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

// stop ends p with SIGTERM (a map flushes and releases its lease), killing
// it if it does not end within stopWait.
func (c *cluster) stop(p *proc) {
	if !p.term(stopWait) {
		c.slowStops++
		fmt.Fprintf(c.logw, "campaign: %s did not end within %v of SIGTERM: killed\n", p.name, stopWait)
		p.kill()
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
	cmd := exec.Command(c.bin, append(args, "--etcd", c.etcdURL, "--timeout", "60s")...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return string(out) + errb.String(), err
	}
	return string(out), nil
}

// heal undoes every fault: it heals the proxies, continues stopped
// processes and restarts dead ones. The reader is left as it is when
// keepReader is false (it is stopped before the checks).
func (c *cluster) heal(keepReader bool) error {
	for _, px := range c.proxies {
		px.Heal()
	}
	for _, p := range append([]*proc{c.etcd, c.ctl}, c.targets...) {
		p.cont()
		if !p.running() {
			if err := p.start(60 * time.Second); err != nil {
				return err
			}
		}
	}
	maps := []*proc{c.owner}
	if keepReader {
		maps = append(maps, c.reader)
	}
	for _, p := range maps {
		p.cont()
		if !p.running() {
			if err := c.tryStartMap(p); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
		}
	}
	return nil
}

// status is what `admin status --json` says about the volumes and tasks.
type status struct {
	Volumes []struct {
		Volume string `json:"volume"`
		Health string `json:"health"`
		Stale  int32  `json:"stale"`
		Moving int32  `json:"moving"`
	} `json:"volumes"`
	Tasks []struct {
		ID    string `json:"id"`
		Kind  string `json:"kind"`
		State string `json:"state"`
	} `json:"tasks"`
	Blocked []string `json:"blocked"`
}

// unhealthy says what keeps the cluster from being healthy: a volume not
// healthy, stale or moving, a running task, a blocked shard; "" when
// nothing.
func (c *cluster) unhealthy() (string, error) {
	out, err := c.tryAdmin("admin", "status", "--json")
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	var st status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return "", fmt.Errorf("admin status --json: %v\n%s", err, out)
	}
	var why []string
	seen := 0
	for _, v := range st.Volumes {
		if v.Volume != rwVolume && v.Volume != roVolume {
			continue
		}
		seen++
		if v.Health != "healthy" || v.Stale != 0 || v.Moving != 0 {
			why = append(why, fmt.Sprintf("volume %s %s, %d stale, %d moving", v.Volume, v.Health, v.Stale, v.Moving))
		}
	}
	if seen != 2 {
		return "", fmt.Errorf("admin status lists %d of volumes %s and %s", seen, rwVolume, roVolume)
	}
	for _, t := range st.Tasks {
		if t.State == "running" {
			why = append(why, fmt.Sprintf("task %s (%s) running", t.ID, t.Kind))
		}
	}
	if len(st.Blocked) > 0 {
		why = append(why, fmt.Sprintf("blocked %v", st.Blocked))
	}
	return strings.Join(why, "; "), nil
}

// waitHealthy waits until the controller reports both volumes healthy with
// no task running and nothing blocked; meanwhile it restarts what died
// late (a fenced owner that exits once it notices).
func (c *cluster) waitHealthy(within time.Duration, keepReader bool) error {
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		if err := c.heal(keepReader); err != nil {
			return err
		}
		why, err := c.unhealthy()
		if err == nil && why == "" {
			return nil
		}
		last = why
		if err != nil {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("not healthy within %v: %s", within, last)
}

func (c *cluster) killAll() {
	for _, p := range append([]*proc{c.owner, c.reader, c.ctl}, c.targets...) {
		if p != nil {
			p.kill()
		}
	}
	if c.etcd != nil {
		c.etcd.kill()
	}
}

// returnOut puts every namespace marked out or failed back in service
// (`ns set-state NS in`, the operator's step once its target is back), and
// those a drain fault left draining or drained.
func (c *cluster) returnOut(ctx context.Context, s *meta.Store) error {
	nss, err := s.Namespaces(ctx)
	if err != nil {
		return err
	}
	for _, n := range nss {
		switch n.State {
		case "out", "failed", "draining", "drained":
			if out, err := c.tryAdmin("ns", "set-state", n.ID, "in"); err != nil {
				return fmt.Errorf("ns set-state %s in: %v: %s", n.ID, err, out)
			}
			if n.State == "out" || n.State == "failed" {
				c.returned++
			}
		}
	}
	return nil
}

// waitState waits up to within for namespace of host to reach state.
func (c *cluster) waitState(ctx context.Context, s *meta.Store, host, state string, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		nss, err := s.Namespaces(ctx)
		if err != nil {
			continue
		}
		for _, n := range nss {
			if n.Host == host && n.State == state {
				return true
			}
		}
	}
	return false
}

// recoverAfter brings the cluster back after a round that failed with
// finding, so that the next round starts healed and healthy: it undoes
// every fault, restarts a fenced owner, waits for the controller to
// restore redundancy, puts out namespaces back in service and, when the
// read-only volume's content was found wrong, writes it again (the rw
// volume's lost blocks were forgotten by verify, leaks are reported once).
// An error means the cluster cannot go on.
func (c *cluster) recoverAfter(s *meta.Store, rd *reader, finding error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.heal(true); err != nil {
		return err
	}
	if err := c.ensureOwner(ctx, s); err != nil {
		return err
	}
	if err := c.waitHealthy(3*time.Minute, true); err != nil {
		return err
	}
	if err := c.returnOut(ctx, s); err != nil {
		return err
	}
	if rd.wrongRead() == nil && !errors.Is(finding, errLostRO) {
		return nil
	}
	rd.forget()
	c.stop(c.reader)
	if err := c.fillReadOnly(); err != nil {
		return err
	}
	return c.tryStartMap(c.reader)
}
