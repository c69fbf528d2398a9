package target

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/cputime"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// BenchmarkTargetCPU measures the CPU a real `nvstripe target serve`
// process spends per GiB moved (target-ms/GiB, from /proc/PID/stat) with
// a file namespace in a tmpfs directory, against the hand-driven
// pipelined host of BenchmarkTarget in this process.
//
// NVSTRIPE_TARGET_BINS=old=/path/a,new=/path/b compares binaries: each
// is a sub-benchmark, and NVSTRIPE_BENCH_ROUNDS=N runs them in N
// interleaved rounds (A, B, A, B, ...; the machine is shared and noisy).
// Without it the benchmark builds the nvstripe of this tree.
func BenchmarkTargetCPU(b *testing.B) {
	runs := benchRuns(b)
	for _, bc := range benchShapes {
		for _, bin := range runs {
			b.Run(bc.name+"/"+bin.name, func(b *testing.B) {
				addr, pid := startBenchTarget(b, bin.path)
				a := dial(b, addr, pdu.Digests{})
				cntlid := a.adminUp(0)
				inCap := inCapsuleMax(b, a)
				io := ioUp(b, addr, pdu.Digests{}, 1, cntlid, 0)
				if bc.op == pdu.IORead {
					// Reads of written data, as a volume's are, not of holes.
					benchLoopSized(b, io, pdu.IOWrite, 32, 32, benchNSSize, inCap, benchNSSize/(32*nsBS))
				}
				benchLoopSized(b, io, bc.op, bc.nlb, bc.depth, benchNSSize, inCap, 64) // warm the file
				before := procCPU(b, pid)
				b.SetBytes(int64(bc.nlb) * nsBS)
				b.ResetTimer()
				benchLoopSized(b, io, bc.op, bc.nlb, bc.depth, benchNSSize, inCap, b.N)
				b.StopTimer()
				cpu := procCPU(b, pid) - before
				gib := float64(b.N) * float64(bc.nlb*nsBS) / (1 << 30)
				b.ReportMetric(cpu/gib, "target-ms/GiB")
				b.ReportMetric(cpu*1000/float64(b.N), "target-µs/op")
			})
		}
	}
}

// inCapsuleMax is the in-capsule write limit the controller of admin
// queue a reports (Identify IOCCSZ), as the initiator reads it.
func inCapsuleMax(b *testing.B, a *host) int {
	b.Helper()
	raw, c := a.identify(pdu.CNSController, 0)
	mustOK(b, "identify controller", c)
	id, err := pdu.ParseIdentifyController(raw)
	if err != nil {
		b.Fatal(err)
	}
	return id.InCapsuleMax()
}

// benchNSSize is the namespace size of BenchmarkTargetCPU.
const benchNSSize = 64 << 20

type benchBin struct{ name, path string }

// benchRuns is the order in which a benchmark runs the binaries of
// targetBins: NVSTRIPE_BENCH_ROUNDS interleaved rounds (A, B, A, B, ...).
func benchRuns(b *testing.B) []benchBin {
	bins := targetBins(b)
	rounds := 1
	if r, err := strconv.Atoi(os.Getenv("NVSTRIPE_BENCH_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	var runs []benchBin
	for i := range rounds * len(bins) {
		runs = append(runs, bins[i%len(bins)])
	}
	return runs
}

func targetBins(b *testing.B) []benchBin {
	if env := os.Getenv("NVSTRIPE_TARGET_BINS"); env != "" {
		var bins []benchBin
		for _, kv := range strings.Split(env, ",") {
			name, path, ok := strings.Cut(kv, "=")
			if !ok {
				b.Fatalf("NVSTRIPE_TARGET_BINS: %q is not NAME=PATH", kv)
			}
			bins = append(bins, benchBin{name, path})
		}
		return bins
	}
	return []benchBin{{"this", testutil.BuildNvstripe(b, "")}}
}

// startBenchTarget runs `target serve` with one namespace of benchNSSize
// in a tmpfs directory (/dev/shm) when there is one, and returns its
// address and process ID.
func startBenchTarget(b *testing.B, bin string) (string, int) {
	b.Helper()
	dir := b.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "nvstripe-bench-")
		if err == nil {
			dir = d
			b.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	var pid int
	addr := startTargetProcessIn(b, bin, dir, &pid, "--ns", "d0:"+strconv.Itoa(benchNSSize>>20)+"MiB",
		"--allow-host", testHost)
	return addr, pid
}

// procCPU is the user+system CPU of process pid in milliseconds.
func procCPU(b *testing.B, pid int) float64 {
	b.Helper()
	cpu, err := cputime.Process(pid)
	if err != nil {
		b.Skipf("needs /proc to measure the target's CPU: %v", err)
	}
	return float64(cpu) / float64(time.Millisecond)
}

// BenchmarkTargetNeighbour measures a victim's 4 KiB QD1 read latency on a
// `target serve` process (tmpfs file namespace), alone and while another
// controller keeps 256 reads of 128 KiB in flight on the same namespace
// (two I/O queues of 128). It reports the victim's p50 and p99 in µs;
// NVSTRIPE_TARGET_BINS and NVSTRIPE_BENCH_ROUNDS work as for
// BenchmarkTargetCPU.
func BenchmarkTargetNeighbour(b *testing.B) {
	runs := benchRuns(b)
	for _, flood := range []bool{false, true} {
		name := "alone"
		if flood {
			name = "neighbour-qd256"
		}
		for _, bin := range runs {
			b.Run(name+"/"+bin.name, func(b *testing.B) {
				addr, _ := startBenchTarget(b, bin.path)
				if flood {
					floodProcess(b, addr)
				}
				victimReads(b, addr, benchNSSize)
			})
		}
	}
}

// floodProcess runs TestNeighbourFloodHelper in a child process (so that
// the flood does not share this process's scheduler with the victim) and
// returns once its reads are in flight; the child stops at cleanup.
func floodProcess(b *testing.B, addr string) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNeighbourFloodHelper$")
	cmd.Env = append(os.Environ(), "NVSTRIPE_FLOOD_ADDR="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout := testutil.StartStdout(b, cmd)
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "flooding\n" {
		b.Fatalf("flood helper: %q", line)
	}
}

// TestNeighbourFloodHelper is BenchmarkTargetNeighbour's flooding host, run
// in a child process: it keeps 2 x 128 reads of 128 KiB in flight on
// NVSTRIPE_FLOOD_ADDR until its stdin closes.
func TestNeighbourFloodHelper(t *testing.T) {
	addr := os.Getenv("NVSTRIPE_FLOOD_ADDR")
	if addr == "" {
		t.Skip("the flooding host of BenchmarkTargetNeighbour, run by it")
	}
	stop := floodReads(t, addr, 2, 128, 32, benchNSSize)
	fmt.Println("flooding")
	io.Copy(io.Discard, os.Stdin)
	stop()
}

// floodReads connects a controller with queues I/O queues and keeps depth
// reads of nlb blocks in flight on each, in the first half of a namespace
// of size bytes, until the returned stop is called.
func floodReads(b testing.TB, addr string, queues, depth int, nlb uint32, size int) (stop func()) {
	a := dial(b, addr, pdu.Digests{})
	cntlid := a.adminUp(0)
	var wg sync.WaitGroup
	done := make(chan struct{})
	var hs []*host
	for q := 1; q <= queues; q++ {
		h := dial(b, addr, pdu.Digests{})
		mustOK(b, "flood io connect", h.connect(uint16(q), uint16(depth-1), cntlid, testNQN, testHost, 0, 0))
		h.nc.SetDeadline(time.Time{})
		hs = append(hs, h)
		wg.Add(1)
		go func() {
			defer wg.Done()
			submit := func(cid int) bool {
				s := rwSQE(pdu.IORead, 1, uint64(cid%(size/2/nsBS/int(nlb)))*uint64(nlb), nlb, false)
				s.CID, s.Flags = uint16(cid), pdu.PSDTSGL
				_, err := h.nc.Write(pdu.AppendCapsuleCmd(nil, &s, nil, h.dg))
				return err == nil
			}
			for cid := range depth {
				if !submit(cid) {
					return
				}
			}
			var buf []byte
			for {
				p, nb, err := pdu.ReadPDU(h.br, buf, -1, h.dg)
				buf = nb
				if err != nil {
					return
				}
				var cid uint16
				switch p.Header.Type {
				case pdu.TypeC2HData:
					if p.Header.Flags&pdu.FlagSuccess == 0 {
						continue
					}
					cid = pdu.ParseDataHdr(p.Hdr).CCCID
				case pdu.TypeCapsuleResp:
					cid = pdu.ParseCapsuleResp(p.Hdr).CID
				default:
					continue
				}
				select {
				case <-done:
					return
				default:
				}
				if !submit(int(cid)) {
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		for _, h := range hs {
			h.nc.Close()
		}
		wg.Wait()
	}
}
