package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/meta/metatest"
)

// jsonRun is one command of TestEveryCommandPrintsJSON, run with -o json
// in order. A daemon is read up to its first JSON document.
type jsonRun struct {
	args   []string
	daemon bool
}

// notRunForJSON names the commands TestEveryCommandPrintsJSON does not
// run, and why. Every other command must appear in its runs.
var notRunForJSON = map[string]string{
	"nvstripe demo":          "refuses -o json with a usage error (checked below)",
	"nvstripe map":           "needs a data path (kernel nbd or namespaces that answer): TestAgentMapUnmapLs drives it",
	"nvstripe unmap":         "needs a mapped volume: TestAgentMapUnmapLs drives it",
	"nvstripe agent":         "needs a socket and state directory of its own: TestAgentMapUnmapLs runs it",
	"nvstripe target agent":  "needs a gossip pool: TestGossipProcesses runs it",
	"nvstripe ns wipe-label": "needs a namespace with a stray label: TestNSWipeLabel runs it with -o json",
	"nvstripe volume settle": "needs namespaces that answer: TestVolumeSettle runs it with -o json",
}

// snakeKey is a stable JSON key: lower case words joined by underscores.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// intString is a JSON string that holds an integer: a number printed the
// way protojson prints 64-bit integers. No command prints one (names in
// these tests are never all digits).
var intString = regexp.MustCompile(`^-?[0-9]+$`)

// checkJSON reports every object key in v that is not snake_case and
// every integer printed as a string.
func checkJSON(t *testing.T, where string, v any) {
	t.Helper()
	switch x := v.(type) {
	case string:
		if intString.MatchString(x) {
			t.Errorf("%s: integer printed as the string %q", where, x)
		}
	case map[string]any:
		for k, e := range x {
			if !snakeKey.MatchString(k) {
				t.Errorf("%s: JSON key %q is not snake_case", where, k)
			}
			checkJSON(t, where+"."+k, e)
		}
	case []any:
		for i, e := range x {
			checkJSON(t, fmt.Sprintf("%s[%d]", where, i), e)
		}
	}
}

// TestEveryCommandPrintsJSON walks the command tree: every command that
// runs must either be run here with -o json, print JSON that parses with
// snake_case keys and integers as numbers, or be listed in notRunForJSON
// with a reason.
func TestEveryCommandPrintsJSON(t *testing.T) {
	ep := metatest.Start(t)[0]
	t.Setenv("NVSTRIPE_ETCD", ep)
	t.Setenv("NVSTRIPE_CLUSTER", "js")
	tgt, _ := startTarget(t)
	dir := t.TempDir()
	runs := []jsonRun{
		{args: []string{"cluster", "init", "--slot-size", "1MiB"}},
		{args: []string{"cluster", "set", "--max-overcommit", "1.5"}},
		{args: []string{"host", "add", "h0", "--label", "rack=r0"}},
		{args: []string{"ns", "add", "--host", "h0", "--nqn", "nqn.test:h0", "--nsid", "1", "--path", "tcp://127.0.0.1:1", "--size", "64MiB"}},
		{args: []string{"host", "add", "h1"}},
		{args: []string{"host", "add", "h2"}},
		{args: []string{"ns", "add", "--host", "h1", "--nqn", "nqn.2024-01.io.test:sub-a", "--nsid", "1", "--path", "tcp://" + tgt}},
		{args: []string{"ns", "discover", "tcp://" + tgt, "--host", "h2"}},
		{args: []string{"cluster", "info"}},
		{args: []string{"host", "ls"}},
		{args: []string{"ns", "ls"}},
		{args: []string{"ns", "set-state", "h0-n1", "in"}},
		{args: []string{"volume", "create", "v", "--size", "8MiB", "--k", "2", "--m", "1", "--chunk", "64KiB", "--allow-shared-domains"}},
		{args: []string{"volume", "ls"}},
		{args: []string{"df"}},
		{args: []string{"volume", "info", "v"}},
		{args: []string{"volume", "resize", "v", "--size", "16MiB"}},
		{args: []string{"volume", "set", "v", "--qos-iops", "2000", "--qos-write-bps", "100MiB/s"}},
		{args: []string{"admin", "status"}},
		{args: []string{"admin", "rebalance"}},
		{args: []string{"admin", "drain", "h0-n1", "--wait"}},
		{args: []string{"admin", "fail", "h0-n1"}},
		{args: []string{"admin", "scrub"}},
		{args: []string{"volume", "rm", "v"}},
		{args: []string{"ns", "rm", "h0-n1"}},
		{args: []string{"host", "rm", "h0"}},
		{args: []string{"host-identity"}},
		{args: []string{"gen-dhchap-key"}},
		{args: []string{"gen-tls-key"}},
		{args: []string{"config", "show"}},
		{args: []string{"version"}},
		{args: []string{"selftest"}},
		{args: []string{"ls", "--agent", filepath.Join(dir, "no-agent.sock"), "--map-sockets", dir}},
		{args: []string{"etcd", "--dir", filepath.Join(dir, "etcd"), "--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0"}, daemon: true},
		{args: []string{"csi", "--endpoint", "unix://" + filepath.Join(dir, "csi.sock"), "--mode", "controller"}, daemon: true},
		{args: []string{"controller", "--holder", "c1", "--probe=false", "--api", filepath.Join(dir, "api.sock")}, daemon: true},
		{args: []string{"target", "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--nqn", "nqn.test:json", "--ns", "d0:1MiB",
			"--allow-host", "any", "--control", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, daemon: true},
	}
	ran := map[string]bool{}
	var control, metrics string
	for _, r := range runs {
		v := runJSON(t, r)
		checkJSON(t, strings.Join(r.args, " "), v)
		ran[commandPath(t, r.args)] = true
		if r.args[0] == "target" {
			control, _ = v.(map[string]any)["control"].(string)
			metrics, _ = v.(map[string]any)["metrics"].(string)
			checkTargetMetrics(t, v.(map[string]any)["metrics"])
		}
	}
	top := []string{"top", "--metrics", metrics, "--interval", "100ms"} // a target's endpoint: no volume rows
	checkJSON(t, strings.Join(top, " "), runJSON(t, jsonRun{args: top}))
	ran[commandPath(t, top)] = true
	if control == "" {
		t.Fatal("target serve -o json named no control address")
	}
	for _, args := range [][]string{{"target", "ana-state", "--control", control, "--dir", dir},
		{"target", "ana-state", "--control", control, "--dir", dir, "--group", "1", "--state", "non-optimized"}} {
		checkJSON(t, strings.Join(args, " "), runJSON(t, jsonRun{args: args}))
		ran[commandPath(t, args)] = true
	}
	if _, _, err := run(t, "demo", "-o", "json"); ExitCode(err) != 2 {
		t.Errorf("demo -o json: %v, want a usage error", err)
	}
	if _, _, err := run(t, "version", "-o", "yaml"); ExitCode(err) != 2 {
		t.Errorf("-o yaml: %v, want a usage error", err)
	}
	walkRunnable(newRootCmd(), func(c *cobra.Command) {
		p := c.CommandPath()
		if !ran[p] && notRunForJSON[p] == "" {
			t.Errorf("%s: not run with -o json here and not listed in notRunForJSON", p)
		}
		if c.Flags().Lookup("output") == nil && c.InheritedFlags().Lookup("output") == nil {
			t.Errorf("%s: no -o flag", p)
		}
	})
}

// runJSON runs r with -o json and decodes its (first) JSON document. A
// daemon is stopped when the test ends.
func runJSON(t *testing.T, r jsonRun) any {
	t.Helper()
	args := append(r.args[:len(r.args):len(r.args)], "-o", "json")
	if !r.daemon {
		out, _, err := run(t, args...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		// Every document (--wait prints progress after the result) must parse.
		var docs []any
		for dec := json.NewDecoder(strings.NewReader(out)); dec.More(); {
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%q: %v\n%s", args, err, out)
			}
			docs = append(docs, v)
		}
		if len(docs) == 0 {
			t.Fatalf("%q printed no JSON", args)
		}
		for _, d := range docs[1:] {
			checkJSON(t, strings.Join(args, " "), d)
		}
		return docs[0]
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, args, pw, io.Discard); pw.Close() }()
	var v any
	err := json.NewDecoder(pr).Decode(&v)
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%q: %v", args, err)
		}
	})
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return v
}

// commandPath is the path of the command args run.
func commandPath(t *testing.T, args []string) string {
	t.Helper()
	c, _, err := newRootCmd().Find(args)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return c.CommandPath()
}

// walkRunnable calls fn for every command that does something besides
// grouping others (help and completion excluded).
func walkRunnable(c *cobra.Command, fn func(*cobra.Command)) {
	if c.HasSubCommands() {
		for _, sub := range c.Commands() {
			walkRunnable(sub, fn)
		}
		return
	}
	if c.Runnable() && c.Name() != "help" && c.Name() != "completion" {
		fn(c)
	}
}

// checkTargetMetrics scrapes the metrics address `target serve -o json`
// printed and looks for the target's series.
func checkTargetMetrics(t *testing.T, addr any) {
	t.Helper()
	a, _ := addr.(string)
	if a == "" {
		t.Fatal("target serve --metrics-listen -o json named no metrics address")
	}
	resp, err := http.Get("http://" + a + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`nvstripe_target_io_ops_total{namespace="d0",nqn="nqn.test:json",nsid="1",op="read"} 0`,
		`nvstripe_target_refused_connections_total{reason="max_connections"} 0`, "nvstripe_target_connections 0"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("target metrics lack %q:\n%s", want, b)
		}
	}
}
