package cli

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/meta/metatest"
)

// complete runs cobra's hidden __complete, as a shell does on TAB, and
// returns the candidates and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	out, stderr, err := run(t, append([]string{"__complete"}, args...)...)
	if err != nil || strings.Contains(strings.ToLower(stderr), "error") {
		t.Fatalf("__complete %q: %v\n%s", args, err, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// TestCompletion: volume, host, namespace and cluster names complete from
// etcd (reached as the environment says), and an etcd that does not answer
// offers nothing, without an error.
func TestCompletion(t *testing.T) {
	ep := metatest.Start(t)[0]
	t.Setenv("NVSTRIPE_ETCD", ep)
	t.Setenv("NVSTRIPE_CLUSTER", "comp")
	a := adminCLI{t: t, etcd: ep, cluster: "comp"}
	a.ok("initialized", "cluster", "init", "--slot-size", "1MiB")
	a.addHosts(0, 3, "16MiB")
	a.ok("created", "volume", "create", "vol1", "--size", "4MiB", "--k", "2", "--m", "1")
	a.ok("created", "volume", "create", "vol2", "--size", "4MiB", "--k", "2", "--m", "1")
	vols, hosts, nss := []string{"vol1", "vol2"}, []string{"h0", "h1", "h2"}, []string{"h0-n1", "h1-n1", "h2-n1"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"volume", "info", ""}, vols},
		{[]string{"volume", "resize", "v"}, vols},
		{[]string{"volume", "rm", "vol2"}, []string{"vol2"}},
		{[]string{"volume", "rm", "vol1", ""}, nil},
		{[]string{"volume", "info", "x"}, nil},
		{[]string{"map", ""}, vols},
		{[]string{"admin", "scrub", ""}, vols},
		{[]string{"host", "rm", ""}, hosts},
		{[]string{"ns", "add", "--host", ""}, hosts},
		{[]string{"ns", "discover", "tcp://127.0.0.1:1", "--host", "h"}, hosts},
		{[]string{"ns", "rm", ""}, nss},
		{[]string{"admin", "fail", "h1"}, []string{"h1-n1"}},
		{[]string{"admin", "drain", ""}, append(hosts, nss...)},
		{[]string{"ns", "set-state", "h0-n1", "d"}, []string{"draining", "down", "drained"}},
		{[]string{"volume", "ls", "--cluster", ""}, []string{"comp"}},
		{[]string{"volume", "info", "--cluster", "nosuch", ""}, nil},
	} {
		got, directive := complete(t, c.args...)
		if !slices.Equal(got, c.want) || directive != ":4" {
			t.Errorf("__complete %q = %q %s; want %q :4 (no file names)", c.args, got, directive, c.want)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	if got, directive := complete(t, "volume", "info", "--etcd", dead, ""); len(got) != 0 || directive != ":4" {
		t.Errorf("etcd not answering: %q %s, want nothing", got, directive)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if out, _, err := run(t, "completion", sh); err != nil || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: %v\n%.200s", sh, err, out)
		}
	}
}
