// Package demo is the one-process nvstripe of `nvstripe demo`: an embedded
// etcd, several userspace NVMe/TCP targets on 127.0.0.1 with file-backed
// namespaces, a k+m volume placed over them, served over NBD (and as a FUSE
// file where /dev/fuse works) until the context ends. Only cmd imports it.
//
// With Options.Chaos an in-process controller (controller.Runner with short
// timings, TCP probes of the targets) and the mapping's task server run
// too: after ready the demo stops a target and shows the real machinery at
// work (namespace down, then out, rebuild tasks handed to the mapping with
// their progress, redundancy and data checked).
//
// Concurrency: Run blocks until ctx is done, then shuts everything down.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/fuse"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/etcdembed"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/volclient"
	"github.com/nvstripe/nvstripe/volume"
)

// Options configure Run. Zero fields take the defaults in their comments.
type Options struct {
	// Dir holds etcd's data and the namespace files. Default: a new
	// temporary directory, removed when Run returns unless Keep.
	Dir  string
	Keep bool
	// Targets is the number of NVMe/TCP targets (one host each). Default 6.
	Targets int
	// K and M are the layout. Default 4 and 2.
	K, M int
	// Size is the volume size in bytes. Default 4 GiB.
	Size int64
	// Chunk is the stripe unit. Default 128 KiB.
	Chunk int64
	// SlotSize is the cluster's slot size. Default 256 MiB (small, so that a
	// demo volume spans several segments).
	SlotSize int64
	// NBDListen is the NBD listener address. Default 127.0.0.1:10809.
	NBDListen string
	// FUSEDir, when set, also mounts the volume there as a file.
	FUSEDir string
	// Chaos, after ready, stops a target, shows degraded reads, and lets an
	// in-process controller (short timings: down after 1s, out 3s later)
	// mark its namespace out and hand the rebuild to this demo's mapping,
	// showing the task records' progress; then it verifies that redundancy
	// is restored and the data intact. A rebuild onto a distinct host needs
	// a spare host: with Chaos, Targets defaults to, and is raised to at
	// least, K+M+1 (7 for 4+2).
	Chaos bool
	// Name is the volume and export name. Default "demo".
	Name string
	// Stats is how often live throughput is printed; 0: every 5s, <0: never.
	Stats time.Duration
	// Out receives progress lines (and "ready: nbd://HOST:PORT/NAME").
	Out io.Writer
	// Ready, when set, is called with the NBD URL once serving.
	Ready func(url string)
}

// Defaults of Options (and of `nvstripe demo`'s flags).
const (
	defaultK, defaultM = 4, 2
	defaultSize        = 4 << 30
	defaultNBDListen   = "127.0.0.1:10809"
)

// AddFlags defines the flags of `nvstripe demo` on fl, with Options'
// defaults.
func (o *Options) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&o.Dir, "dir", "", "directory for etcd data and namespace files (default: a new temporary directory, removed at exit)")
	fl.BoolVar(&o.Keep, "keep", false, "keep the temporary directory at exit")
	fl.IntVar(&o.Targets, "targets", 0, "number of userspace NVMe/TCP targets, one host each (default 6, 7 with --chaos)")
	fl.BoolVar(&o.Chaos, "chaos", false, "after ready: stop a target, show degraded reads, rebuild its shards, verify")
	fl.IntVar(&o.K, "k", defaultK, "data shards per stripe")
	fl.IntVar(&o.M, "m", defaultM, "parity shards per stripe")
	o.Size = defaultSize
	fl.Var(units.NewFlag(&o.Size), "size", "volume size")
	fl.StringVar(&o.NBDListen, "nbd-listen", defaultNBDListen, "NBD listener address")
	fl.StringVar(&o.FUSEDir, "fuse", "", "also show the volume as a file in a FUSE mount at this directory")
}

func (o *Options) ensureDefaults() {
	def := func(p *int64, v int64) {
		if *p == 0 {
			*p = v
		}
	}
	if o.K == 0 {
		o.K, o.M = defaultK, defaultM
	}
	if o.Targets == 0 {
		o.Targets = 6
		if o.Chaos {
			o.Targets = o.K + o.M + 1
		}
	}
	def(&o.Size, defaultSize)
	def(&o.Chunk, 128<<10)
	def(&o.SlotSize, 256<<20)
	def((*int64)(&o.Stats), int64(5*time.Second))
	if o.NBDListen == "" {
		o.NBDListen = defaultNBDListen
	}
	if o.Name == "" {
		o.Name = "demo"
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// layout is the demo volume's layout: checksummed with a write log (its
// checksums are bound to their place too: openVolume, format 4).
func (o *Options) layout() meta.Layout {
	return meta.Layout{K: o.K, M: o.M, Chunk: o.Chunk, Checksum: meta.ChecksumCRC32C, WriteLog: meta.WriteLogPPL}
}

// nsSize is the size of each namespace: room for this volume's share twice
// over (so a rebuild has space), plus the label slot.
func (o *Options) nsSize() int64 {
	segData := o.layout().Geometry(o.SlotSize).SegmentData()
	segs := (o.Size + segData - 1) / segData
	perNS := (segs*int64(o.K+o.M) + int64(o.Targets) - 1) / int64(o.Targets)
	return (2*perNS + 1) * o.SlotSize
}

// Run starts everything, prints "ready: nbd://HOST:PORT/NAME" and serves
// until ctx is done; then it shuts down cleanly.
func Run(ctx context.Context, o Options) error {
	o.ensureDefaults()
	if o.Dir == "" {
		var err error
		if o.Dir, err = os.MkdirTemp("", "nvstripe-demo-"); err != nil {
			return err
		}
		if !o.Keep {
			defer os.RemoveAll(o.Dir)
		}
	}
	if spare := o.K + o.M + 1; o.Chaos && o.Targets < spare {
		fmt.Fprintf(o.Out, "chaos: %d targets leave no spare host to rebuild a %d+%d volume onto: starting %d\n", o.Targets, o.K, o.M, spare)
		o.Targets = spare
	}
	d := &demo{o: o}
	defer d.shutdown()
	if err := d.start(ctx); err != nil {
		return err
	}
	url := fmt.Sprintf("nbd://%s/%s", d.nbdAddr, o.Name)
	fmt.Fprintf(o.Out, "ready: %s\n", url)
	if o.Ready != nil {
		o.Ready(url)
	}
	if o.Chaos {
		if err := d.chaos(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("demo: chaos: %w", err)
		} else if err != nil {
			fmt.Fprintln(o.Out, "chaos: interrupted")
		}
	}
	d.showStats(ctx)
	fmt.Fprintln(o.Out, "shutting down")
	return nil
}

// demo holds what Run started, for shutdown.
type demo struct {
	o       Options
	etcd    *etcdembed.Server
	store   *meta.Store
	targets []*demoTarget
	mapped  *volclient.Mapped
	counted *blockdev.Meter
	nbd     *nbd.Server
	nbdAddr string
	served  chan error
	fs      *fuse.FS
	holder  string // the mapping's owner name (task records address it)

	// stopControl and controlDone stop and wait for the controller and the
	// task server (Chaos only).
	stopControl context.CancelFunc
	controlDone chan struct{}

	degraded atomic.Int64 // stripes read or written degraded
}

func (d *demo) start(ctx context.Context) error {
	steps := []struct {
		what string
		do   func(context.Context) error
	}{
		{"etcd", d.startEtcd},
		{"targets", d.startTargets},
		{"cluster", d.register},
		{"volume", d.openVolume},
		{"nbd", d.serveNBD},
		{"fuse", d.mountFUSE},
		{"controller", d.startControl},
	}
	for _, s := range steps {
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("demo: %s: %w", s.what, err)
		}
	}
	return nil
}

func (d *demo) startEtcd(ctx context.Context) error {
	var err error
	d.etcd, err = etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(d.o.Dir, "etcd")})
	if err != nil {
		return err
	}
	d.store, err = meta.Open(ctx, meta.Config{Endpoints: d.etcd.Endpoints(), Cluster: "demo"})
	if err == nil {
		fmt.Fprintf(d.o.Out, "etcd: embedded, %v (data in %s)\n", d.etcd.Endpoints(), filepath.Join(d.o.Dir, "etcd"))
	}
	return err
}

func (d *demo) startTargets(ctx context.Context) error {
	for i := 1; i <= d.o.Targets; i++ {
		t, err := startTarget(ctx, d.o.Dir, i, d.o.nsSize())
		if err != nil {
			return err
		}
		d.targets = append(d.targets, t)
		fmt.Fprintf(d.o.Out, "target %d: nvme-tcp %s %s, namespace 1 = %s (%s, sparse)\n",
			i, t.addr(), t.nqn, filepath.Join(d.o.Dir, fmt.Sprintf("target%d", i), "ns1.img"), units.FormatSize(d.o.nsSize()))
	}
	return nil
}

// register records the cluster, hosts and namespaces in etcd and labels the
// namespaces; a restarted demo over the same --dir finds them there.
func (d *demo) register(ctx context.Context) error {
	c, err := d.store.Cluster(ctx)
	if errors.Is(err, meta.ErrNotInitialized) {
		c, err = d.store.InitCluster(ctx, meta.InitOptions{SlotSize: d.o.SlotSize})
	}
	if err != nil {
		return err
	}
	for _, t := range d.targets {
		if err := d.registerTarget(ctx, c, t); err != nil {
			return err
		}
	}
	return nil
}

func (d *demo) registerTarget(ctx context.Context, c *meta.ClusterRecord, t *demoTarget) error {
	if _, err := d.store.AddHost(ctx, t.host, nil); err != nil && !errors.Is(err, meta.ErrExists) {
		return err
	}
	spec := meta.NamespaceSpec{Host: t.host, NQN: t.nqn, NSID: 1, Size: t.file.Size(),
		Paths: []meta.PathRecord{{Addr: "tcp://" + t.addr(), ANAGroup: 1, ANAState: meta.ANAOptimized}}}
	rec, err := d.store.AddNamespace(ctx, spec)
	if errors.Is(err, meta.ErrExists) {
		rec, err = d.refreshPaths(ctx, spec)
	}
	if err != nil {
		return err
	}
	dev, err := volclient.Connect(ctx, rec, volclient.NamespaceOptions{})
	if err != nil {
		return err
	}
	defer dev.Close()
	return volclient.WriteLabel(ctx, dev, c.Label(rec.ID))
}

// refreshPaths accepts an existing namespace record only when it names the
// same address (targets listen on new ports each run).
func (d *demo) refreshPaths(ctx context.Context, spec meta.NamespaceSpec) (*meta.NamespaceRecord, error) {
	id := fmt.Sprintf("%s-n%d", spec.Host, spec.NSID)
	rec, err := d.store.Namespace(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(rec.Paths) == 0 || rec.Paths[0].Addr != spec.Paths[0].Addr {
		return nil, fmt.Errorf("namespace %s exists from an earlier run at %v: start the demo with a fresh --dir", id, rec.Paths)
	}
	return rec, nil
}

func (d *demo) openVolume(ctx context.Context) error {
	_, err := d.store.Volume(ctx, d.o.Name)
	if errors.Is(err, meta.ErrNotFound) {
		_, err = d.store.CreateVolume(ctx, meta.VolumeSpec{Name: d.o.Name, Size: d.o.Size,
			Layout: d.o.layout(), BindChecksums: true})
	}
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	d.holder = "demo." + host
	d.mapped, err = volclient.OpenVolume(ctx, d.store, d.o.Name, volclient.OpenOptions{Holder: d.holder,
		Namespaces: volclient.NamespaceOptions{ControllerLossTimeout: 2 * time.Second},
		Events:     volume.EventListener{Degraded: func(volume.DegradedInfo) { d.degraded.Add(1) }}})
	if err != nil {
		return err
	}
	d.counted = blockdev.NewMeter(d.mapped.Volume, nil)
	fmt.Fprintf(d.o.Out, "volume %s: %s, %d+%d, chunk %s, over %d namespaces\n",
		d.o.Name, units.FormatSize(d.o.Size), d.o.K, d.o.M, units.FormatSize(d.o.Chunk), d.o.Targets)
	return nil
}

func (d *demo) serveNBD(ctx context.Context) error {
	srv, err := nbd.NewServer(nbd.Options{Exports: map[string]nbd.Export{
		d.o.Name: {Device: d.counted, Description: fmt.Sprintf("nvstripe %d+%d demo volume", d.o.K, d.o.M)},
	}})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", d.o.NBDListen)
	if err != nil {
		return fmt.Errorf("listening on %s (is another demo running? use --nbd-listen): %w", d.o.NBDListen, err)
	}
	d.nbd, d.nbdAddr, d.served = srv, l.Addr().String(), make(chan error, 1)
	go func() { d.served <- srv.Serve(context.WithoutCancel(ctx), l) }()
	return nil
}

func (d *demo) mountFUSE(context.Context) error {
	if d.o.FUSEDir == "" {
		return nil
	}
	if err := os.MkdirAll(d.o.FUSEDir, 0o755); err != nil {
		return err
	}
	fs, err := fuse.Mount(d.o.FUSEDir, map[string]blockdev.Device{d.o.Name: d.counted}, nil)
	if err != nil {
		fmt.Fprintf(d.o.Out, "fuse: not mounted (%v); NBD still serves\n", err)
		return nil
	}
	d.fs = fs
	fmt.Fprintf(d.o.Out, "fuse: %s\n", filepath.Join(d.o.FUSEDir, d.o.Name))
	return nil
}

// showStats prints throughput until ctx is done.
func (d *demo) showStats(ctx context.Context) {
	if d.o.Stats < 0 {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(d.o.Stats)
	defer tick.Stop()
	var lastR, lastW int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r, w := d.counted.ReadBytes.Load(), d.counted.WriteBytes.Load()
		if r != lastR || w != lastW {
			secs := d.o.Stats.Seconds()
			fmt.Fprintf(d.o.Out, "io: read %.1f MB/s, write %.1f MB/s, errors %d\n",
				float64(r-lastR)/secs/1e6, float64(w-lastW)/secs/1e6, d.counted.Errors.Load())
		}
		lastR, lastW = r, w
	}
}

// shutdown stops everything Run started, in reverse order.
func (d *demo) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if d.fs != nil {
		d.fs.Unmount()
	}
	if d.nbd != nil {
		d.nbd.Close()
		<-d.served
	}
	d.stopControlLoops()
	if d.mapped != nil {
		d.mapped.Close(ctx)
	}
	for _, t := range d.targets {
		t.close()
	}
	if d.store != nil {
		d.store.Close()
	}
	if d.etcd != nil {
		d.etcd.Close()
	}
}
