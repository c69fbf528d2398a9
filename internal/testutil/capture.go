package testutil

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CaptureLo captures the TCP traffic of port on the loopback interface
// into file (pcapng, with dumpcap) and returns a function that stops the
// capture once everything was written; t's cleanup stops it too. dumpcap
// starts capturing and writes packets some time after it says so, so a
// probe listener is captured too: CaptureLo returns once a probe
// connection shows up in the file (read back with tshark), and stop waits
// for one made after the test's traffic. A test skips where dumpcap or
// tshark is missing or cannot capture on lo.
func CaptureLo(t testing.TB, port, file string) (stop func()) {
	t.Helper()
	for _, tool := range []string{"tshark", "dumpcap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install tshark): %v", tool, err)
		}
	}
	probeAddr := Serve(t, func(c net.Conn) { c.Close() })
	_, pport, _ := net.SplitHostPort(probeAddr)
	cmd := exec.Command("dumpcap", "-q", "-i", "lo", "-f", "tcp port "+port+" or tcp port "+pport, "-w", file)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if msg := waitCapturing(stderr); msg != "" {
		cmd.Wait()
		t.Skipf("dumpcap cannot capture on lo here: %s", msg)
	}
	probe(t, file, probeAddr)
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		probe(t, file, probeAddr) // a connection made after the test's traffic: all of it is in the file
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("dumpcap did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitCapturing reads dumpcap's stderr until it says it is capturing
// (returns "") or exits (returns what it said).
func waitCapturing(stderr io.Reader) string {
	ready := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stderr)
		var log strings.Builder
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Capturing on") {
				ready <- ""
			}
		}
		ready <- log.String()
	}()
	return <-ready
}

// probe connects to the probe listener at addr until one of the
// connections made by this call shows up in the capture file, found by
// its source port: packets are written in the order they were captured,
// so everything sent before the call is in the file then. (Counting the
// probe listener's packets instead is not enough: the close of an earlier
// probe connection can arrive late and look like a new one.)
func probe(t testing.TB, file, addr string) {
	t.Helper()
	_, pport, _ := net.SplitHostPort(addr)
	var ports []string
	WaitFor(t, "a probe connection in the capture", func() bool {
		if c, err := net.Dial("tcp", addr); err == nil {
			_, src, _ := net.SplitHostPort(c.LocalAddr().String())
			c.Close()
			ports = append(ports, src)
			if len(ports) > 32 {
				ports = ports[1:]
			}
		}
		if len(ports) == 0 {
			return false
		}
		filter := "tcp.dstport==" + pport + " && tcp.srcport in {" + strings.Join(ports, ",") + "}"
		out, _ := exec.Command("tshark", "-r", file, "-Y", filter).Output()
		return len(bytes.TrimSpace(out)) > 0
	})
}
