package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// watchCLI runs `admin status --watch` in-process until the test ends and
// returns its output, line by line.
func watchCLI(t *testing.T, a adminCLI, extra ...string) *bufio.Scanner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	args := append([]string{"admin", "status", "--watch", "20ms", "--etcd", a.etcd, "--cluster", a.cluster}, extra...)
	go func() { done <- Run(ctx, args, pw, io.Discard); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, pr)
		if err := <-done; err != nil {
			t.Errorf("%q: %v", args, err)
		}
	})
	return bufio.NewScanner(pr)
}

// watchCluster is a cluster of three namespaces and one 2+1 volume.
func watchCluster(t *testing.T) adminCLI {
	a := initCluster(t, "w")
	a.addHosts(0, 3, "16MiB")
	a.ok("created", "volume", "create", "v", "--size", "4MiB", "--k", "2", "--m", "1")
	return a
}

// header is the line that starts a refresh of `admin status --watch`.
var header = regexp.MustCompile(`^--- \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)(: (.*))? ---$`)

// TestAdminStatusWatch: every refresh starts with a header naming the time
// and, after the first, what changed since the one before.
func TestAdminStatusWatch(t *testing.T) {
	a := watchCluster(t)
	sc := watchCLI(t, a)
	nextHeader := func() string {
		t.Helper()
		for n := 0; sc.Scan(); n++ {
			if n > 100 { // a refresh of this cluster is 15 lines
				t.Fatalf("no refresh header in %d lines (last %q)", n, sc.Text())
			}
			if m := header.FindStringSubmatch(sc.Text()); m != nil {
				return m[3]
			}
			if strings.HasPrefix(sc.Text(), "---") {
				t.Fatalf("malformed header %q", sc.Text())
			}
		}
		t.Fatalf("watch ended: %v", sc.Err())
		return ""
	}
	if first := nextHeader(); first != "" {
		t.Errorf("first header names changes: %q", first)
	}
	if second := nextHeader(); second != "no change" {
		t.Errorf("second header: %q, want no change", second)
	}
	a.ok("failed", "admin", "fail", "h0-n1")
	for {
		if ch := nextHeader(); ch != "no change" {
			if ch != "namespace h0-n1: in -> failed" {
				t.Errorf("changes: %q, want namespace h0-n1: in -> failed", ch)
			}
			break
		}
	}
}

// TestAdminStatusWatchJSON: with -o json every refresh is one line, a JSON
// object whose first field is the time.
func TestAdminStatusWatchJSON(t *testing.T) {
	sc := watchCLI(t, watchCluster(t), "-o", "json")
	for range 2 {
		if !sc.Scan() {
			t.Fatalf("watch ended: %v", sc.Err())
		}
		line := sc.Text()
		var st struct {
			Time     time.Time `json:"time"`
			Revision int64     `json:"revision"`
			Volumes  []struct {
				Volume string `json:"volume"`
			} `json:"volumes"`
		}
		if err := json.Unmarshal([]byte(line), &st); err != nil || !strings.HasPrefix(line, `{"time":"`) ||
			st.Time.IsZero() || st.Revision == 0 || len(st.Volumes) != 1 || st.Volumes[0].Volume != "v" {
			t.Fatalf("line %q: %+v, %v; want an object with the time first", line, st, err)
		}
	}
}
