package target

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// heapInUse is the Go heap and stacks in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// vmRSS is the process's resident set (Linux), 0 where unknown.
func vmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestIdleConnRSS reports what NVSTRIPE_IDLE_CONNS idle connections that
// sent only an ICReq cost the target (a measurement, not a check: run with
// NVSTRIPE_IDLE_CONNS=1000 -v).
func TestIdleConnRSS(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NVSTRIPE_IDLE_CONNS"))
	if n == 0 {
		t.Skip("measurement: set NVSTRIPE_IDLE_CONNS=1000 to run")
	}
	f := newFixture(t, 1, nil)
	heap0, rss0 := heapInUse(), vmRSS()
	for i := 0; i < n; i++ {
		dial(t, f.t.Addr(0), pdu.Digests{})
	}
	time.Sleep(500 * time.Millisecond)
	heap1, rss1 := heapInUse(), vmRSS()
	t.Logf("%d idle ICReq-only connections: heap+stacks +%.1f MiB, VmRSS +%.1f MiB (whole process, clients included)",
		n, float64(heap1-heap0)/(1<<20), float64(int64(rss1)-int64(rss0))/(1<<20))
}
