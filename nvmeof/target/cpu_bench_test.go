package target

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
	bins := targetBins(b)
	rounds := 1
	if r, err := strconv.Atoi(os.Getenv("NVSTRIPE_BENCH_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	for _, bc := range []struct {
		name  string
		op    uint8
		nlb   uint32
		depth int
	}{
		{"write-128KiB-qd32", pdu.IOWrite, 32, 32},
		{"read-128KiB-qd32", pdu.IORead, 32, 32},
		{"write-4KiB-qd1", pdu.IOWrite, 1, 1},
		{"read-4KiB-qd1", pdu.IORead, 1, 1},
	} {
		for i := range rounds * len(bins) {
			bin := bins[i%len(bins)]
			b.Run(bc.name+"/"+bin.name, func(b *testing.B) {
				addr, pid := startBenchTarget(b, bin.path)
				a := dial(b, addr, pdu.Digests{})
				cntlid := a.adminUp(0)
				inCap := inCapsuleMax(b, a)
				io := ioUp(b, addr, pdu.Digests{}, 1, cntlid, 0)
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
	if _, err := exec.LookPath("go"); err != nil {
		b.Skip("needs the go tool to build nvstripe (or NVSTRIPE_TARGET_BINS)")
	}
	bin := filepath.Join(b.TempDir(), "nvstripe")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/nvstripe/nvstripe/cmd/nvstripe").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return []benchBin{{"this", bin}}
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
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Skipf("needs /proc to measure the target's CPU: %v", err)
	}
	// Fields after the command name (which may hold spaces) start at
	// field 3; utime and stime are fields 14 and 15, in clock ticks.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) * 1000 / clockTicks
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100
