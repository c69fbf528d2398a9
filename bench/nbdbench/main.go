// Command nbdbench serves an in-memory blockdev.Mem over NBD for
// bench/nbd.sh: the nbd package alone, without a volume behind it. It
// prints "ready: nbd://ADDR/EXPORT" once listening and serves until
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
	"strconv"
	"strings"
	"syscall"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nbd"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:10809", "TCP address, or a path for a unix socket")
	size := flag.String("size", "1G", "device size (K, M, G suffixes)")
	bs := flag.Int("block-size", 4096, "device block size")
	export := flag.String("export", "bench", "export name")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := run(*listen, *size, *bs, *export); err != nil {
		log.Print("nbdbench: ", err)
	}
}

func run(listen, sizeStr string, bs int, export string) error {
	size, err := parseSize(sizeStr)
	if err != nil {
		return err
	}
	dev, err := blockdev.NewMem(size, bs)
	if err != nil {
		return err
	}
	defer dev.Close()
	srv, err := nbd.NewServer(nbd.Options{
		Exports: map[string]nbd.Export{export: {Device: dev, Description: "nbdbench memory"}},
		Logf:    log.Printf,
	})
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

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40} {
		if t, ok := strings.CutSuffix(strings.TrimSuffix(strings.ToUpper(s), "IB"), suffix); ok {
			s, mult = t, m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}
