// Command nbdbench serves, for test/bench/nbd.sh, either an erasure-coded volume
// over k+m in-memory namespaces (-k 4 -m 2, the default: to compare
// with nbdkit memory) or, with -k 0, one in-memory blockdev.Mem
// (the nbd package alone); with -tls-certificates DIR it requires TLS. It prints "ready: nbd://ADDR/EXPORT" once listening and serves until
// interrupted. It is a test tool, not part of the nvstripe binary.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/tlsfiles"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/volume"
	"github.com/nvstripe/nvstripe/volume/layout"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:10809", "TCP address, or a path for a unix socket")
	size, bs, chunk := int64(1<<30), int64(4096), int64(128<<10)
	flag.Var(units.NewFlag(&size), "size", "device size (units.ParseSize: 1G, 512MiB)")
	flag.Var(units.NewFlag(&bs), "block-size", "device block size")
	export := flag.String("export", "bench", "export name")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	k := flag.Int("k", 4, "data shards of the volume; 0 serves a plain in-memory device")
	m := flag.Int("m", 2, "parity shards of the volume")
	flag.Var(units.NewFlag(&chunk), "chunk", "chunk size of the volume")
	sndbuf := flag.Int("loopback-sndbuf", 0, "nbd.Options.LoopbackSendBuffer (0: the default; negative: the kernel's autotuning)")
	backlog := flag.Int("reply-backlog", 0, "nbd.Options.ReplyBacklog (0: the default; negative: no bound)")
	inflight := flag.Int("max-inflight-bytes", 0, "nbd.Options.MaxInFlightBytes (0: the default)")
	pipeline := flag.Bool("pipeline-sync", false, "nbd.Options.PipelineSynchronous: run a connection's requests side by side")
	certs := flag.String("tls-certificates", "", "directory with server-cert.pem and server-key.pem: require TLS (STARTTLS)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	tune := nbd.Options{LoopbackSendBuffer: *sndbuf, ReplyBacklog: *backlog, MaxInFlightBytes: *inflight, PipelineSynchronous: *pipeline}
	if *certs != "" {
		cfg, err := tlsfiles.NBDKitDir(*certs, false).Server()
		if err != nil {
			log.Fatal(err)
		}
		tune.TLS, tune.RequireTLS = cfg, true
	}
	if err := run(*listen, size, int(bs), *export, shape{*k, *m, chunk}, tune); err != nil {
		log.Print("nbdbench: ", err)
	}
}

// shape is the volume's layout: K data and M parity shards of Chunk bytes.
type shape struct {
	K, M  int
	Chunk int64
}

// run serves the device with the nbd options under test (tune).
func run(listen string, size int64, bs int, export string, sh shape, tune nbd.Options) error {
	dev, err := device(size, bs, sh)
	if err != nil {
		return err
	}
	defer dev.Close()
	tune.Exports = map[string]nbd.Export{export: {Device: dev, Description: "nbdbench memory"}}
	tune.Logf = log.Printf
	srv, err := nbd.NewServer(tune)
	if err != nil {
		return err
	}
	defer srv.Close()
	network := "tcp"
	if strings.HasPrefix(listen, "/") {
		network = "unix"
		os.Remove(listen)
	}
	l, err := net.Listen(network, listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("ready: nbd://%s/%s\n", l.Addr(), export)
	return srv.Serve(ctx, l)
}

// device returns a Mem of size bytes (k == 0) or a k+m volume of size bytes
// (128 KiB chunks, 64 MiB slots) over k+m Mem namespaces.
func device(size int64, bs int, sh shape) (blockdev.Device, error) {
	if sh.K == 0 {
		return blockdev.NewMem(size, bs)
	}
	g := layout.Geometry{K: sh.K, M: sh.M, Chunk: sh.Chunk, SlotSize: 64 << 20}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	slots := g.Segments(size)
	devs := volume.DeviceMap{}
	free := map[string]int64{}
	for i := 0; i < g.N(); i++ {
		mem, err := blockdev.NewMem(slots*g.SlotSize, 4096)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("mem%d", i)
		devs[name], free[name] = mem, slots
	}
	return volume.New(volume.Options{Geometry: g, Size: size, Devices: devs, Alloc: volume.NewMemAllocator(g.N(), free)})
}
