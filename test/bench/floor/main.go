// Command floor measures the copy floor of the full-stack benchmark on this
// machine: the CPU that the socket traffic of a mapped 4+2 volume costs
// with no protocol, no goroutine hand-offs and no erasure coding or
// checksums (unless asked for), so that make bench-stack's figures can be
// read against what the kernel alone charges for the same bytes.
//
// It plays the map: one goroutine reads 1 MiB requests from a source
// process over loopback TCP (as the map reads fio's NBD writes) and sends
// each as 12 writes of 128 KiB to 6 sink sockets in a second process (2
// data chunks per target and 1 parity chunk each: 1.5 bytes per byte, as
// a 4+2 volume with 128 KiB chunks). Reading, it asks the sinks for 8
// chunks of 128 KiB per MiB (4 data shards) and sends the MiB to the
// consumer. CPU is user plus system time of each process over the run,
// per GiB of volume data. -codec adds what the map computes per byte:
// crc32c of every 4 KiB block sent (or received) and the Reed-Solomon
// parity of each stripe. -sink-copy makes each sink copy what it receives
// into memory once more (a target's write into its mapped namespace
// file).
//
// It is a measuring tool, not part of the nvstripe binary:
//
//	go run ./test/bench/floor -gib 4 -o json
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/crc32c"
	"github.com/nvstripe/nvstripe/ec"
	"github.com/nvstripe/nvstripe/internal/cputime"
)

const (
	chunk   = 128 << 10
	request = 1 << 20
	sinks   = 6
	k, m    = 4, 2
)

// result is one pattern's figures, per GiB of volume data.
type result struct {
	Pattern     string  `json:"pattern"`
	GiB         float64 `json:"gib"`
	MiBps       float64 `json:"mib_per_s"`
	ClientMs    float64 `json:"client_cpu_ms_per_gib"`
	SinksMs     float64 `json:"sinks_cpu_ms_per_gib"`
	PeerMs      float64 `json:"source_cpu_ms_per_gib"`
	Codec       bool    `json:"codec"`
	SinkCopying bool    `json:"sink_copy"`
}

func main() {
	role := flag.String("role", "", "internal: sinks, source or consumer")
	addr := flag.String("addr", "", "internal: the address to dial (source, consumer)")
	gib := flag.Float64("gib", 2, "GiB of volume data each way")
	codec := flag.Bool("codec", false, "compute crc32c per 4 KiB block and the parity of each stripe, as the map does")
	sinkCopy := flag.Bool("sink-copy", false, "sinks copy what they receive once more (a target's write to its file)")
	pattern := flag.String("pattern", "", "write or read (default: both)")
	out := flag.String("o", "text", "text or json")
	flag.Parse()
	var err error
	switch *role {
	case "sinks":
		err = serveSinks(*sinkCopy)
	case "source":
		err = source(*addr)
	case "consumer":
		err = consume(*addr)
	default:
		err = run(*pattern, *gib, *codec, *sinkCopy, *out)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func run(only string, gib float64, codec, sinkCopy bool, out string) error {
	patterns := []string{"write", "read"}
	switch only {
	case "":
	case "write", "read":
		patterns = []string{only}
	default:
		return fmt.Errorf("-pattern %q: want write or read", only)
	}
	var results []result
	for _, pattern := range patterns {
		r, err := measure(pattern, int64(gib*(1<<30))/request, codec, sinkCopy)
		if err != nil {
			return fmt.Errorf("%s: %w", pattern, err)
		}
		results = append(results, r)
	}
	if out == "json" {
		e := json.NewEncoder(os.Stdout)
		e.SetIndent("", "  ")
		return e.Encode(results)
	}
	fmt.Printf("copy floor: map traffic of a 4+2 volume, 128 KiB chunks, 1 MiB requests, loopback TCP (codec %v, sink copy %v)\n", codec, sinkCopy)
	fmt.Printf("%8s %8s %14s %14s %14s\n", "pattern", "MiB/s", "client ms/GiB", "sinks ms/GiB", "peer ms/GiB")
	for _, r := range results {
		fmt.Printf("%8s %8.0f %14.0f %14.0f %14.0f\n", r.Pattern, r.MiBps, r.ClientMs, r.SinksMs, r.PeerMs)
	}
	return nil
}

// measure runs one pattern over n requests of 1 MiB.
func measure(pattern string, n int64, codec, sinkCopy bool) (result, error) {
	args := []string{"-role", "sinks"}
	if sinkCopy {
		args = append(args, "-sink-copy")
	}
	sinkProc, addrs, err := startSinks(args)
	if err != nil {
		return result{}, err
	}
	defer sinkProc.Process.Kill()
	conns := make([]net.Conn, sinks)
	for i, a := range addrs {
		if conns[i], err = net.Dial("tcp", a); err != nil {
			return result{}, err
		}
		defer conns[i].Close()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	defer ln.Close()
	peerRole := map[string]string{"write": "source", "read": "consumer"}[pattern]
	peer := exec.Command(os.Args[0], "-role", peerRole, "-addr", ln.Addr().String())
	peer.Stderr = os.Stderr
	if err := peer.Start(); err != nil {
		return result{}, err
	}
	defer peer.Process.Kill()
	c, err := ln.Accept()
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	w := newWork(codec)
	sink0, _ := cputime.Process(sinkProc.Process.Pid)
	peer0, _ := cputime.Process(peer.Process.Pid)
	self0, start := cputime.Self(), time.Now()
	for range n {
		if pattern == "write" {
			err = w.write(c, conns)
		} else {
			err = w.read(c, conns)
		}
		if err != nil {
			return result{}, err
		}
	}
	self, wall := cputime.Self()-self0, time.Since(start)
	sink1, _ := cputime.Process(sinkProc.Process.Pid)
	peer1, _ := cputime.Process(peer.Process.Pid)
	g := float64(n*request) / (1 << 30)
	perGiB := func(d time.Duration) float64 { return float64(d.Milliseconds()) / g }
	return result{Pattern: pattern, GiB: g, MiBps: g * 1024 / wall.Seconds(),
		ClientMs: perGiB(self), SinksMs: perGiB(sink1 - sink0), PeerMs: perGiB(peer1 - peer0),
		Codec: codec, SinkCopying: sinkCopy}, nil
}

// work is the client's buffers and, with codec, its codec.
type work struct {
	buf    []byte
	parity [][]byte
	codec  *ec.Codec
	sums   []uint32
}

func newWork(codec bool) *work {
	w := &work{buf: make([]byte, request)}
	for range m {
		w.parity = append(w.parity, make([]byte, chunk))
	}
	if codec {
		c, err := ec.New(k, m)
		if err != nil {
			log.Fatal(err)
		}
		w.codec = c
	}
	return w
}

// write reads one request from the source and sends its two stripes.
func (w *work) write(src net.Conn, conns []net.Conn) error {
	if _, err := io.ReadFull(src, w.buf); err != nil {
		return err
	}
	for s := 0; s < request/(k*chunk); s++ {
		data := w.buf[s*k*chunk : (s+1)*k*chunk]
		shards := make([][]byte, 0, k+m)
		for d := range k {
			shards = append(shards, data[d*chunk:(d+1)*chunk])
		}
		shards = append(shards, w.parity...)
		if w.codec != nil {
			if err := w.codec.Encode(shards); err != nil {
				return err
			}
			w.sum(shards)
		}
		for i, sh := range shards {
			if _, err := conns[(s*(k+m)+i)%sinks].Write(sh); err != nil {
				return err
			}
		}
	}
	return nil
}

// read asks the sinks for one request's data chunks and sends it on.
func (w *work) read(dst net.Conn, conns []net.Conn) error {
	var ask [8]byte
	binary.LittleEndian.PutUint64(ask[:], chunk)
	n := request / chunk
	for i := range n {
		if _, err := conns[i%sinks].Write(ask[:]); err != nil {
			return err
		}
	}
	for i := range n {
		b := w.buf[i*chunk : (i+1)*chunk]
		if _, err := io.ReadFull(conns[i%sinks], b); err != nil {
			return err
		}
		if w.codec != nil {
			w.sum([][]byte{b})
		}
	}
	_, err := dst.Write(w.buf)
	return err
}

func (w *work) sum(shards [][]byte) {
	w.sums = w.sums[:0]
	for _, sh := range shards {
		for b := 0; b < len(sh); b += 4096 {
			w.sums = append(w.sums, crc32c.Checksum(sh[b:b+4096]))
		}
	}
}

// startSinks starts the sinks process and reads its addresses.
func startSinks(args []string) (*exec.Cmd, []string, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		return nil, nil, fmt.Errorf("sinks did not start: %w", err)
	}
	return cmd, strings.Fields(line), nil
}

// serveSinks listens on 6 ports, prints them, and serves each connection:
// data it is sent is read (and copied once more with sinkCopy); an 8-byte
// request for n bytes gets n bytes back.
func serveSinks(sinkCopy bool) error {
	var addrs []string
	for range sinks {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addrs = append(addrs, ln.Addr().String())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go sink(c, sinkCopy)
			}
		}()
	}
	fmt.Println(strings.Join(addrs, " "))
	select {}
}

func sink(c net.Conn, sinkCopy bool) {
	defer c.Close()
	buf := make([]byte, chunk)
	store := make([]byte, 64<<20)
	at := 0
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if asks := readRequests(buf[:n]); asks > 0 {
			for range asks {
				if _, err := c.Write(store[at : at+chunk]); err != nil {
					return
				}
				at = (at + chunk) % len(store)
			}
			continue
		}
		if sinkCopy {
			at = (at + copy(store[at:], buf[:n])) % (len(store) - chunk)
		}
	}
}

// readRequests returns how many 8-byte read requests b is, or 0 when it
// is data.
func readRequests(b []byte) int {
	if len(b) == 0 || len(b)%8 != 0 || len(b) > 64 {
		return 0
	}
	for i := 0; i < len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != chunk {
			return 0
		}
	}
	return len(b) / 8
}

// source sends 1 MiB writes until the connection closes.
func source(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	buf := make([]byte, request)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for {
		if _, err := c.Write(buf); err != nil {
			return nil
		}
	}
}

// consume reads and drops until the connection closes.
func consume(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, c)
	return nil
}
