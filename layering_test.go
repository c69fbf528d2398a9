// Package nvstripe_test holds repository-wide checks, run by `go test` like
// any other test (`make layering`): the import table ("which package may
// import which", importRules here, copied in docs/architecture.md and kept
// equal by docs_table_test.go), a few banned constructs (clock and global
// randomness in pure packages, panics with a string, os.Getenv outside cmd,
// init functions, %v on an error in fmt.Errorf, missing package docs), and
// the docs kept true to the code: paths and Go names cited in comments and
// docs, no references to tracker items (docs_refs_test.go), the etcd
// schema's key prefixes (docs_schema_test.go).
//
// The checks parse every .go file under the module (all build tags, so
// _linux/_darwin files count too) with go/parser; they need no network and no
// go command. New packages are picked up automatically: one without a row in
// importRules gets the default (std and blockdev) and the failure says how to
// add a row.
package nvstripe_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

const modulePath = "github.com/nvstripe/nvstripe"

// tableHint ends every import failure.
const tableHint = "(the import table is importRules in layering_test.go, copied in docs/architecture.md; change both together)"

// rule is one row of the import table: what the packages it covers may
// import. Patterns are module-relative for ours ("blockdev", "nvmeof/..."
// for a folder and everything below it, "*" for everything) and full import
// paths for third-party modules.
type rule struct {
	ours  []string          // packages of ours that may be imported
	not   []string          // packages of ours that may not be, though ours covers them (non-test files)
	third []string          // third-party import paths that may be imported
	std   map[string]string // forbidden standard-library patterns -> reason
	why   string            // what the layer is, printed with a violation
}

// Reasons shared by several rows.
const (
	whyPure = "a pure package is a deterministic function of its inputs (no IO, no clock, no global randomness); " +
		"IO lives in nvmeof, nbd, fuse, meta and cmd"
	whyRandV1   = "math/rand (v1) invites its global source; use math/rand/v2 with an explicit seeded *rand.Rand passed in"
	whyVolumeIO = "volume issues IO only through the blockdev.Device values it is given"
)

// pureStd is the standard library a pure package must not import.
func pureStd() map[string]string {
	return map[string]string{
		"os": whyPure, "os/...": whyPure, "net": whyPure, "net/...": whyPure,
		"syscall": whyPure, "math/rand": whyRandV1,
	}
}

// pureRule returns the row of a pure package that may import third.
func pureRule(why string, third ...string) rule {
	return rule{third: third, std: pureStd(), why: why}
}

// importRules is the import table (docs/architecture.md summarises it). Keys are module-relative package
// paths; "x/..." covers x and everything below it, an exact key wins over a
// pattern, a longer pattern over a shorter one. Third-party paths not listed
// in a row are forbidden for it; the standard library is allowed except for
// the row's std entries.
func importRules() map[string]rule {
	layoutStd := pureStd()
	layoutStd["time"] = "volume/layout is pure offset maths: it takes no clock"
	syncPkgs := []string{"golang.org/x/sync/..."}
	const pflag = "github.com/spf13/pflag" // flag groups (AddFlags) of the daemons' options
	wiring := []string{"golang.org/x/sync/...", "github.com/prometheus/client_golang/...", "github.com/vbauerster/mpb/v8/...",
		"google.golang.org/grpc/...", "google.golang.org/protobuf/...", "github.com/dgraph-io/badger/v4/...", pflag}
	return map[string]rule{
		"": {why: "the module root holds only repository-wide tests"},
		"blockdev/...": {ours: []string{"blockdev"}, third: []string{"golang.org/x/sys/..."},
			why: "blockdev is the IO seam at the bottom: it knows no layer above it (x/sys for pwritev2)"},
		"blockdev/faultdev": {ours: []string{"blockdev", "internal/retry"},
			why: "blockdev/faultdev injects faults into any blockdev.Device (its delays sleep with internal/retry)"},
		"ec":             pureRule("ec is the erasure codec", "github.com/klauspost/reedsolomon"),
		"volume/layout":  {std: layoutStd, why: "volume/layout is pure offset maths"},
		"placement":      pureRule("placement is pure planning over a Cluster value"),
		"nvmeof/pdu":     pureRule("nvmeof/pdu is a pure codec over []byte and io.Reader"),
		"nbd/proto":      pureRule("nbd/proto is a pure codec over []byte and io.Reader"),
		"internal/units": pureRule("units parses and formats byte sizes", "github.com/dustin/go-humanize"),
		"crc32c":         pureRule("crc32c is a checksum over []byte", "golang.org/x/sys/cpu"),
		"nbd/nbdtest": {ours: []string{"blockdev", "nbd/proto"},
			why: "nbd/nbdtest is a test NBD client: it speaks the protocol of nbd/proto to any server"},
		"volume": {ours: []string{"blockdev", "ec", "volume/layout", "crc32c"}, third: syncPkgs,
			std: map[string]string{"os": whyVolumeIO, "net": whyVolumeIO, "net/...": whyVolumeIO},
			why: "volume is the IO engine over blockdev.Device"},
		"nvmeof/...": {ours: []string{"blockdev", "nvmeof/pdu", "internal/accept", "internal/units", "nvmeof/auth", "nvmeof/tlspsk", "internal/retry", "internal/rawsock"}, third: []string{"golang.org/x/sys/...", "github.com/google/uuid"},
			why: "nvmeof provides and serves any blockdev.Device"},
		"nvmeof/tlspsk": {why: "nvmeof/tlspsk is TLS 1.3 with a PSK over any net.Conn"},
		"nvmeof/target/metrics": {ours: []string{"nvmeof/target", "internal/metricshttp"}, third: []string{"github.com/prometheus/client_golang/..."},
			why: "nvmeof/target/metrics exports a target's counters to Prometheus"},
		"nbd": {ours: []string{"blockdev", "nbd/proto", "internal/accept", "internal/retry", "internal/rawsock"},
			third: []string{"golang.org/x/sys/...", "github.com/mdlayher/genetlink", "github.com/mdlayher/netlink/..."},
			why:   "nbd serves any blockdev.Device"},
		"internal/accept":   {ours: []string{"internal/retry"}, why: "accept is the accept loop the servers share (nvmeof/target, nbd)"},
		"internal/rawsock":  {third: []string{"golang.org/x/sys/..."}, why: "rawsock is raw socket reads and writes for the data paths (nbd, nvmeof)"},
		"internal/faultnet": {why: "faultnet is a fault-injecting TCP proxy for tests and fault campaigns"},

		"internal/retry":       {why: "internal/retry is the one home of backoff and of sleeps that end with their context"},
		"internal/testutil":    {ours: []string{"internal/retry"}, why: "internal/testutil holds the helpers tests share (imported by tests only)"},
		"internal/cputime":     {why: "internal/cputime reads process CPU time for benchmarks and bench tools"},
		"internal/tlsfiles":    {why: "internal/tlsfiles is the one loader of TLS certificate, key and CA files"},
		"internal/table":       {why: "internal/table is the one style of the command line's text tables"},
		"internal/metricshttp": {third: []string{"github.com/prometheus/client_golang/..."}, why: "internal/metricshttp is the daemons' one Prometheus endpoint"},

		"test/campaign": {ours: []string{"*"}, third: []string{"github.com/anishathalye/porcupine"},
			why: "campaign runs the fault campaign over the nvstripe binary's processes and checks its histories (tests only)"},
		"test/scale": {ours: []string{"*"}, why: "scale is the scale harness over one etcd, simulated nodes and the controller (tests only)"},
		"ublk/uring": {third: []string{"golang.org/x/sys/..."}, why: "uring is the io_uring binding under ublk"},
		"ublk": {ours: []string{"blockdev", "ublk/uring"}, third: []string{"golang.org/x/sys/..."},
			why: "ublk serves any blockdev.Device as /dev/ublkbN"},
		"fuse": {ours: []string{"blockdev"}, third: []string{"github.com/hanwen/go-fuse/v2/..."},
			why: "fuse serves any blockdev.Device"},
		"qos": {ours: []string{"blockdev"}, why: "qos limits any blockdev.Device's IO with token buckets"},
		"meta/...": {ours: []string{"meta/...", "volume/layout", "placement", "internal/units", "internal/table"},
			third: []string{"go.etcd.io/...", "google.golang.org/grpc/...", "go.uber.org/zap/...", "github.com/google/uuid"},
			why:   "meta is the only home of etcd (it may use plain value types of volume/layout and placement, and units to print sizes)"},
		"health": {third: []string{"github.com/hashicorp/memberlist"},
			why: "health turns memberlist gossip into health events"},
		"controller/...": {ours: []string{"controller/...", "meta", "placement", "health", "moves", "internal/retry"},
			why: "controller decides over meta's records and health and moves shards through its Mover interface (volclient implements it); it opens no volume itself"},
		"controller/decide": {ours: []string{"placement"}, std: pureStd(),
			why: "controller/decide is the controller's pure decider: a State value in, Actions out"},
		"moves": {ours: []string{"controller/decide", "meta"},
			why: "moves is what both sides of a shard move share (task record codec, events, log lines, pacer): the node imports it without the controller"},
		"volclient/...": {ours: []string{"*"}, not: []string{"agent/...", "nbd/...", "fuse", "demo/...", "cmd/..."}, third: append(syncPkgs, pflag),
			why: "volclient opens a volume over its namespaces: wiring below the daemons, which serving is not part of"},
		"controllerd": {ours: []string{"controller/...", "moves", "volclient", "meta", "health", "health/pool", "internal/logging", "config", "internal/units", "internal/metricshttp"}, third: []string{"github.com/prometheus/client_golang/...", pflag},
			why: "controllerd composes the controller daemon: the runner, the volclient mover, metrics, gossip and the admin API"},
		"controller/admin": {ours: []string{"controller", "controller/decide", "moves", "meta", "placement", "internal/units", "internal/tlsfiles", "internal/table", "internal/retry"}, third: []string{"google.golang.org/grpc/...", "google.golang.org/protobuf/...", pflag},
			why: "controller/admin serves the admin operations on meta over gRPC"},
		"targetd": {ours: []string{"nvmeof/...", "health/pool", "meta", "config", "internal/units"}, third: []string{pflag},
			why: "targetd composes the target daemon: the target, its control API, metrics and gossip member"},
		"health/pool": {ours: []string{"health", "meta"}, third: []string{pflag},
			why: "health/pool keeps a gossip member joined and its seed record registered in etcd"},
		"capacity": {ours: []string{"meta", "placement", "internal/units", "config", "internal/table"}, third: []string{pflag},
			why: "capacity sums the cluster's space per failure domain (nvstripe df, volume create's check)"},
		"csi": {ours: []string{"agent", "agent/api", "meta", "capacity", "placement", "nbd", "ublk", "internal/buildinfo", "internal/retry"}, not: []string{"agent"},
			third: []string{"github.com/container-storage-interface/spec/...", "github.com/kubernetes-csi/csi-test/v5/...",
				"google.golang.org/grpc/...", "google.golang.org/protobuf/...", "golang.org/x/sys/..."},
			why: "csi is the Kubernetes CSI driver: controller over meta and capacity, node over the agent's API (its tests start an agent)"},
		"internal/buildinfo": pureRule("buildinfo reads the binary's build information"),
		"internal/jsonout":   {third: []string{"google.golang.org/protobuf/..."}, why: "jsonout writes results as JSON"},
		"internal/logging":   pureRule("logging builds slog loggers and adapts Logf hooks to them"),
		"internal/pprofhttp": {third: []string{pflag}, why: "pprofhttp serves the daemons' runtime profiles (--pprof) on a loopback listener"},
		"config":             {ours: []string{"internal/tlsfiles", "internal/table"}, third: []string{"sigs.k8s.io/yaml", pflag}, why: "config layers flags, environment, file and defaults"},
		"internal/rpctest":   {third: []string{"google.golang.org/grpc/..."}, why: "rpctest checks any gRPC server's reflection and health services"},
		"agent/...":          {ours: []string{"*"}, third: wiring, why: "agent is node-side wiring"},
		"agent/top": {ours: []string{"internal/units", "internal/table"}, third: []string{"github.com/prometheus/client_model/...", "github.com/prometheus/common/..."},
			why: "agent/top reads the per-volume telemetry of Prometheus endpoints for nvstripe top"},
		"demo/...":           {ours: []string{"*"}, not: []string{"agent/...", "cmd/..."}, third: wiring, why: "demo is one-process wiring"},
		"test/bench/...":     {ours: []string{"*"}, third: wiring, why: "bench holds benchmark tools: wiring, like demo"},
		"cmd/...":            {ours: []string{"*"}, third: []string{"*"}, why: "cmd is the top: it parses, calls and prints"},
		"test/vmtest":        {why: "vmtest only runs the built binary in a VM"},
		"deploy":             {third: []string{"k8s.io/api/...", "k8s.io/apimachinery/...", "sigs.k8s.io/yaml"}, why: "deploy only checks the systemd units and Kubernetes manifests under deploy/ (tests, no code)"},
		"test/vmtest/replay": {why: "test/vmtest/replay replays a dm-log-writes log in the VM guest (a test tool)"},
		defaultRuleMarker:    {ours: []string{"blockdev"}, why: "default for packages without a row"},
	}
}

// defaultRuleMarker is the importRules key of the default row.
const defaultRuleMarker = "<default>"

// importedReasons explains, per imported package, why most layers may not
// import it. Checked before the importer's generic reason.
func importedReasons() []struct{ pattern, reason string } {
	return []struct{ pattern, reason string }{
		{"cmd/...", "cmd is the top of the graph: nothing imports it; move shared code into a library package"},
		{"agent/...", "agent is wiring: only cmd imports it"},
		{"demo/...", "demo is wiring: only cmd imports it"},
		{"controllerd", "controllerd is the controller daemon: only cmd imports it"},
		{"targetd", "targetd is the target daemon: only cmd imports it"},
		{"volclient/...", "volclient is wiring: the daemons (agent, controllerd, demo) and cmd open volumes with it"},
		{"meta/...", "only controller, agent, demo and cmd talk to metadata; a lower layer declares a small interface (like volume's DirtyLog) that a meta adapter implements"},
		{"controller/...", "controller is a daemon wired by agent, demo and cmd"},
		{"volume", "only volclient and the wiring open the engine: nbd, fuse and nvmeof serve or provide any blockdev.Device, the controller moves shards through its Mover"},
		{"go.etcd.io/...", "meta is the only importer of etcd: one home for the schema, transactions and error mapping"},
		{"github.com/hashicorp/memberlist", "health is the only user of memberlist"},
		{"github.com/hanwen/go-fuse/v2/...", "fuse is the only user of go-fuse"},
		{"github.com/klauspost/reedsolomon", "ec is the only user of reedsolomon: one place pins the parity format"},
		{"github.com/spf13/...", "flags are parsed only in cmd"},
	}
}

// testOnlyImports are third-party packages _test.go files may import on top
// of their package's row. Tests may also import any package of ours but cmd,
// agent and demo (test kits such as blockdev/devtest, or a real peer such as
// nvmeof/target in an initiator test), and any of the standard library.
func testOnlyImports() []string {
	return []string{"pgregory.net/rapid", "golang.org/x/sync/...", "github.com/cockroachdb/datadriven"}
}

// purePackages are the packages whose non-test code may not read the clock
// or global randomness.
func purePackages() []string {
	return []string{"volume/layout", "placement", "ec", "nvmeof/pdu", "nbd/proto", "internal/units", "controller/decide"}
}

// goFile is one parsed source file.
type goFile struct {
	path string // slash path relative to the module root
	pkg  string // module-relative package path ("" for the root)
	test bool   // a _test.go file
	fset *token.FileSet
	f    *ast.File
}

// pos formats a position in f.
func (g goFile) pos(p token.Pos) string {
	return fmt.Sprintf("%s:%d", g.path, g.fset.Position(p).Line)
}

// importName returns the local name file g uses for import path imp, or ""
// when g does not import it.
func (g goFile) importName(imp string) string {
	for _, s := range g.f.Imports {
		if p, _ := strconv.Unquote(s.Path.Value); p == imp {
			if s.Name != nil {
				return s.Name.Name
			}
			base := path.Base(imp)
			if _, err := strconv.Atoi(strings.TrimPrefix(base, "v")); err == nil && strings.HasPrefix(base, "v") {
				base = path.Base(path.Dir(imp)) // math/rand/v2 is package rand
			}
			return base
		}
	}
	return ""
}

// loadModule parses every .go file of the module rooted at the current
// directory, skipping testdata, hidden and underscore folders and nested
// modules.
func loadModule(t *testing.T) []goFile {
	t.Helper()
	fset := token.NewFileSet()
	var files []goFile
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipDir(p, d)
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("cannot parse %s: %v", p, err)
			return nil
		}
		rel := filepath.ToSlash(p)
		pkg := path.Dir(rel)
		if pkg == "." {
			pkg = ""
		}
		files = append(files, goFile{path: rel, pkg: pkg, test: strings.HasSuffix(p, "_test.go"), fset: fset, f: f})
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module: %v", err)
	}
	if len(files) == 0 {
		t.Fatal("found no Go files: the test must run from the module root")
	}
	return files
}

// skipDir decides whether WalkDir descends into directory p.
func skipDir(p string, d fs.DirEntry) error {
	if p == "." {
		return nil
	}
	name := d.Name()
	if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
		return filepath.SkipDir // a nested module is not ours to check
	}
	return nil
}

// match reports whether pattern ("x", "x/...", "*") covers p.
func match(pattern, p string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		return p == base || strings.HasPrefix(p, base+"/")
	default:
		return p == pattern
	}
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// ruleFor returns the row covering pkg and whether pkg has one of its own.
func ruleFor(rules map[string]rule, pkg string) (rule, bool) {
	if r, ok := rules[pkg]; ok {
		return r, true
	}
	best, found := "", false
	for pat := range rules {
		if strings.HasSuffix(pat, "/...") && match(pat, pkg) && (!found || len(pat) > len(best)) {
			best, found = pat, true
		}
	}
	if found {
		return rules[best], true
	}
	return rules[defaultRuleMarker], false
}

// isStd reports whether an import path is in the standard library.
func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// checkImports returns the import-table violations of one file.
func checkImports(rules map[string]rule, g goFile) []string {
	r, known := ruleFor(rules, g.pkg)
	var out []string
	for _, s := range g.f.Imports {
		imp, _ := strconv.Unquote(s.Path.Value)
		reason := importViolation(r, g, imp)
		if reason == "" {
			continue
		}
		msg := fmt.Sprintf("%s: %s imports %q: %s", g.pos(s.Pos()), displayPkg(g.pkg), imp, reason)
		if !known {
			msg += fmt.Sprintf("; package %s has no row in the import table, so it gets the default (std and blockdev): add a row for it to importRules", displayPkg(g.pkg))
		}
		out = append(out, msg+" "+tableHint)
	}
	return out
}

func displayPkg(pkg string) string {
	if pkg == "" {
		return "the module root"
	}
	return pkg
}

// importViolation returns why g may not import imp under rule r, or "".
func importViolation(r rule, g goFile, imp string) string {
	switch {
	case isStd(imp):
		if g.test {
			return ""
		}
		for pat, why := range r.std {
			if match(pat, imp) {
				return why
			}
		}
		return ""
	case imp == modulePath || strings.HasPrefix(imp, modulePath+"/"):
		ours := strings.TrimPrefix(strings.TrimPrefix(imp, modulePath), "/")
		if ours == g.pkg || matchAny(r.ours, ours) && !(matchAny(r.not, ours) && !g.test) ||
			g.test && !matchAny([]string{"cmd/...", "agent/...", "demo/..."}, ours) {
			return ""
		}
		generic := fmt.Sprintf("%s may import only %v of ours", displayPkg(g.pkg), r.ours)
		if len(r.not) > 0 {
			generic += fmt.Sprintf(", and not %v", r.not)
		}
		return reasonFor(r, ours, generic)
	default:
		if matchAny(r.third, imp) && !(match("go.etcd.io/...", imp) && !match("meta/...", g.pkg)) {
			return ""
		}
		if g.test && matchAny(testOnlyImports(), imp) {
			return ""
		}
		return reasonFor(r, imp, fmt.Sprintf("%s may import only %v outside the standard library", displayPkg(g.pkg), r.third))
	}
}

// reasonFor picks the specific reason for importing imp, else generic.
func reasonFor(r rule, imp, generic string) string {
	for _, ir := range importedReasons() {
		if match(ir.pattern, imp) {
			return ir.reason + " (" + r.why + ")"
		}
	}
	return generic + " (" + r.why + ")"
}

// checkPure returns clock and global-randomness uses in a pure package's
// non-test file.
func checkPure(g goFile) []string {
	if g.test || !slices.Contains(purePackages(), g.pkg) {
		return nil
	}
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}
	globalRand := map[string]bool{"Int": true, "IntN": true, "Intn": true, "Int31": true, "Int31n": true, "Int32": true, "Int32N": true,
		"Int63": true, "Int63n": true, "Int64": true, "Int64N": true, "Uint": true, "UintN": true, "Uint32": true, "Uint32N": true,
		"Uint64": true, "Uint64N": true, "N": true, "Float32": true, "Float64": true, "ExpFloat64": true, "NormFloat64": true,
		"Perm": true, "Shuffle": true, "Seed": true, "Read": true}
	timeName := g.importName("time")
	randNames := []string{g.importName("math/rand"), g.importName("math/rand/v2")}
	var out []string
	ast.Inspect(g.f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		switch {
		case !ok:
		case x.Name == timeName && clock[sel.Sel.Name]:
			out = append(out, fmt.Sprintf("%s: time.%s in pure package %s: take `now time.Time` or a tick count as an argument", g.pos(sel.Pos()), sel.Sel.Name, g.pkg))
		case x.Name != "" && slices.Contains(randNames, x.Name) && globalRand[sel.Sel.Name]:
			out = append(out, fmt.Sprintf("%s: global rand.%s in pure package %s: pass an explicit seeded *rand.Rand", g.pos(sel.Pos()), sel.Sel.Name, g.pkg))
		}
		return true
	})
	return out
}

// checkBanned returns banned constructs in a non-test file written by hand
// (generated code, marked "Code generated ... DO NOT EDIT.", is the
// generator's style): panic with a string literal, environment reads outside
// cmd, init functions, and %v/%s applied to an error in fmt.Errorf.
func checkBanned(g goFile) []string {
	if g.test || ast.IsGenerated(g.f) {
		return nil
	}
	var out []string
	for _, d := range g.f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
			out = append(out, fmt.Sprintf("%s: func init(): no hidden start-up work or package state; build it explicitly", g.pos(fd.Pos())))
		}
	}
	osName, fmtName := g.importName("os"), g.importName("fmt")
	ast.Inspect(g.f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" && len(call.Args) == 1 && isStringLit(call.Args[0]) {
			out = append(out, fmt.Sprintf("%s: panic with a string: return an error (bad input must never panic), or panic with a typed invariant value", g.pos(call.Pos())))
		}
		switch pkgCall(call, osName) {
		case "Getenv", "LookupEnv", "Environ", "ExpandEnv":
			if !match("cmd/...", g.pkg) {
				out = append(out, fmt.Sprintf("%s: environment read outside cmd: cmd reads the environment and passes values in as options", g.pos(call.Pos())))
			}
		}
		if pkgCall(call, fmtName) == "Errorf" {
			out = append(out, checkErrorf(g, call)...)
		}
		return true
	})
	return out
}

// isStringLit reports whether e is a string literal or a concatenation of them.
func isStringLit(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Kind == token.STRING
	case *ast.BinaryExpr:
		return e.Op == token.ADD && isStringLit(e.X) && isStringLit(e.Y)
	case *ast.ParenExpr:
		return isStringLit(e.X)
	}
	return false
}

// pkgCall returns the function name if call is pkgName.F(...), else "".
func pkgCall(call *ast.CallExpr, pkgName string) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || pkgName == "" {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkgName {
		return sel.Sel.Name
	}
	return ""
}

// checkErrorf flags %v or %s applied to an error-looking argument of
// fmt.Errorf. The check is syntactic (no type information): an argument
// counts as an error when it is named err, errX, xErr or ErrX, or is a call
// like ctx.Err(). err.Error() is the explicit way to keep only the text.
func checkErrorf(g goFile, call *ast.CallExpr) []string {
	if len(call.Args) < 2 {
		return nil
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return nil
	}
	format, err := strconv.Unquote(lit.Value)
	if err != nil {
		return nil
	}
	verbs, ok := formatVerbs(format)
	if !ok {
		return nil
	}
	var out []string
	for i, verb := range verbs {
		if i+1 >= len(call.Args) || (verb != 'v' && verb != 's') || !errorLike(call.Args[i+1]) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: fmt.Errorf applies %%%c to an error: use %%w so errors.Is/As see the cause (or err.Error() to drop it on purpose)", g.pos(call.Args[i+1].Pos()), verb))
	}
	return out
}

// formatVerbs returns the verb consuming each argument of a printf format
// ('*' for a width or precision argument). ok is false for formats with
// explicit argument indexes, which it does not follow.
func formatVerbs(format string) (verbs []rune, ok bool) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.ContainsRune("+-# 0", rune(format[i])) {
			i++
		}
		for i < len(format) && (format[i] == '.' || format[i] == '*' || format[i] >= '0' && format[i] <= '9') {
			if format[i] == '*' {
				verbs = append(verbs, '*')
			}
			i++
		}
		if i >= len(format) {
			break
		}
		switch format[i] {
		case '[':
			return nil, false
		case '%':
			continue
		}
		verbs = append(verbs, rune(format[i]))
	}
	return verbs, true
}

// errorLike reports whether e looks like an error value by its name.
func errorLike(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return errorName(e.Name)
	case *ast.SelectorExpr:
		return errorName(e.Sel.Name)
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		return ok && (sel.Sel.Name == "Err" || sel.Sel.Name == "New" && isIdent(sel.X, "errors") || sel.Sel.Name == "Errorf" && isIdent(sel.X, "fmt"))
	case *ast.ParenExpr:
		return errorLike(e.X)
	}
	return false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// errorName: err, errFoo, fooErr, Err, ErrFoo.
func errorName(n string) bool {
	upperAt := func(i int) bool { return len(n) > i && unicode.IsUpper(rune(n[i])) }
	return n == "err" || n == "Err" ||
		strings.HasPrefix(n, "err") && upperAt(3) ||
		strings.HasPrefix(n, "Err") && upperAt(3) ||
		strings.HasSuffix(n, "Err") && len(n) > 3
}

// checkDocs returns packages without a package doc comment.
func checkDocs(files []goFile) []string {
	documented := map[string]bool{}
	var pkgs []string
	for _, g := range files {
		if g.test {
			continue
		}
		if _, seen := documented[g.pkg]; !seen {
			pkgs = append(pkgs, g.pkg)
			documented[g.pkg] = false
		}
		if g.f.Doc != nil && strings.TrimSpace(g.f.Doc.Text()) != "" {
			documented[g.pkg] = true
		}
	}
	var out []string
	for _, p := range pkgs {
		if !documented[p] {
			out = append(out, fmt.Sprintf("package %s has no doc comment: say what it is for, its concurrency contract and, for codecs, the wire format", displayPkg(p)))
		}
	}
	return out
}

// report fails t once per violation, in a stable order.
func report(t *testing.T, violations []string) {
	t.Helper()
	sort.Strings(violations)
	for _, v := range violations {
		t.Error(v)
	}
}

// TestImportTable enforces the import table on every file.
func TestImportTable(t *testing.T) {
	rules := importRules()
	var v []string
	for _, g := range loadModule(t) {
		v = append(v, checkImports(rules, g)...)
	}
	report(t, v)
}

// TestPurePackages: no clock and no global randomness in pure packages.
func TestPurePackages(t *testing.T) {
	var v []string
	for _, g := range loadModule(t) {
		v = append(v, checkPure(g)...)
	}
	report(t, v)
}

// TestBannedConstructs: string panics, environment reads outside cmd, init
// functions, %v on errors in fmt.Errorf.
func TestBannedConstructs(t *testing.T) {
	var v []string
	for _, g := range loadModule(t) {
		v = append(v, checkBanned(g)...)
	}
	report(t, v)
}

// TestCommentPaths: no comment, doc or README points at a file outside the
// repository (the design and conventions live in docs/), and the files of
// the repository that docs/*.md and README.md name exist.
func TestCommentPaths(t *testing.T) {
	var v []string
	for _, g := range loadModule(t) {
		v = append(v, checkCommentPaths(g)...)
	}
	for _, d := range loadDocs(t) {
		v = append(v, checkDocPaths(d, existsInRepo)...)
	}
	report(t, v)
}

// outsidePath matches, in a comment, an absolute path under /work, a
// relative path that climbs out (dot-dot-slash), the team folder, or the
// notes that lived there.
var outsidePath = regexp.MustCompile(`(/work/|\.\./|\bshared/|\bDESIGN\.md|\bSTYLE\.md)`)

// bareNote matches a markdown file named without a folder ("toolchain.md").
var bareNote = regexp.MustCompile("(?:^|[\\s(\\[`])([A-Za-z0-9_-]+\\.md)\\b")

// foreignNote returns the first markdown file text names without a folder
// that is neither at the module root nor in docs/ (notes kept elsewhere),
// or "". exists answers for slash paths relative to the module root.
func foreignNote(text string, exists func(string) bool) string {
	for _, m := range bareNote.FindAllStringSubmatch(text, -1) {
		if !exists(m[1]) && !exists("docs/"+m[1]) {
			return m[1]
		}
	}
	return ""
}

// checkCommentPaths returns comments that name a path outside the repository.
func checkCommentPaths(g goFile) []string {
	var out []string
	for _, cg := range g.f.Comments {
		for _, c := range cg.List {
			m := outsidePath.FindString(c.Text)
			if m == "" {
				m = foreignNote(c.Text, existsInRepo)
			}
			if m != "" {
				out = append(out, fmt.Sprintf("%s: comment names %q, outside the repository: point at docs/architecture.md or docs/style.md, or say it in the comment", g.pos(c.Pos()), m))
			}
		}
	}
	return out
}

// TestPackageDocs: every package has a doc comment.
func TestPackageDocs(t *testing.T) {
	report(t, checkDocs(loadModule(t)))
}

// parseSource parses src as file name of module-relative package pkg.
func parseSource(t *testing.T, pkg, name, src string) goFile {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return goFile{path: path.Join(pkg, name), pkg: pkg, test: strings.HasSuffix(name, "_test.go"), fset: fset, f: f}
}

// TestChecksCatch feeds each check a file that breaks it and one that does
// not, so a check that silently stops working fails here.
func TestChecksCatch(t *testing.T) {
	rules := importRules()
	tests := []struct {
		name, pkg, file, src string
		check                func(goFile) []string
		want                 []string // substrings, one per expected violation
	}{
		{"ec imports os and blockdev", "ec", "a.go", `package ec
import ("os"; "github.com/nvstripe/nvstripe/blockdev"; "github.com/klauspost/reedsolomon")
var _, _, _ = os.Args, blockdev.ErrCorrupt, reedsolomon.New`,
			func(g goFile) []string { return checkImports(rules, g) },
			[]string{`"os": a pure package`, `"github.com/nvstripe/nvstripe/blockdev": ec may import only []`}},
		{"etcd outside meta", "volume", "a.go", `package volume
import _ "go.etcd.io/etcd/client/v3"
import _ "github.com/nvstripe/nvstripe/meta"`,
			func(g goFile) []string { return checkImports(rules, g) },
			[]string{"meta is the only importer of etcd", "only controller, agent, demo and cmd talk to metadata"}},
		{"cmd may not import etcd either", "cmd/nvstripe/cli", "a.go", `package cli
import _ "go.etcd.io/etcd/client/v3"
import _ "github.com/spf13/cobra"`,
			func(g goFile) []string { return checkImports(rules, g) },
			[]string{"meta is the only importer of etcd"}},
		{"nbd imports volume", "nbd", "a.go", `package nbd
import _ "github.com/nvstripe/nvstripe/volume"`,
			func(g goFile) []string { return checkImports(rules, g) },
			[]string{"only volclient and the wiring open the engine"}},
		{"controller opens no volume", "controller", "a.go", `package controller
import _ "github.com/nvstripe/nvstripe/volume"
import _ "github.com/nvstripe/nvstripe/nvmeof/initiator"
import _ "github.com/nvstripe/nvstripe/meta"`,
			func(g goFile) []string { return checkImports(rules, g) },
			[]string{"only volclient and the wiring open the engine", "controller may import only"}},
		{"unknown package gets the default", "newthing", "a.go", `package newthing
import _ "github.com/nvstripe/nvstripe/blockdev"
import _ "github.com/nvstripe/nvstripe/ec"`,
			func(g goFile) []string { return checkImports(rules, g) },
			[]string{"no row in the import table"}},
		{"tests may use kits and rapid", "volume", "a_test.go", `package volume
import ("os"; _ "pgregory.net/rapid"; _ "github.com/nvstripe/nvstripe/blockdev/faultdev"; _ "github.com/nvstripe/nvstripe/volume")`,
			func(g goFile) []string { return checkImports(rules, g) }, nil},
		{"tests may not import demo", "volume", "a_test.go", `package volume_test
import _ "github.com/nvstripe/nvstripe/demo"`,
			func(g goFile) []string { return checkImports(rules, g) },
			[]string{"demo is wiring"}},
		{"clock and global rand in a pure package", "placement", "a.go", `package placement
import ("time"; "math/rand/v2")
func f(r *rand.Rand) (time.Time, int, int) { return time.Now(), rand.IntN(3), r.IntN(3) }`,
			checkPure, []string{"time.Now in pure package", "global rand.IntN"}},
		{"clock allowed outside pure packages", "volume", "a.go", `package volume
import "time"
var _ = time.Now`, checkPure, nil},
		{"banned constructs", "volume", "a.go", `package volume
import ("fmt"; "os")
func init() {}
func f(err error) error {
	_ = os.Getenv("X")
	if err != nil { panic("bad " + "thing") }
	_ = fmt.Errorf("a %d%%: %v", 1, err)
	_ = fmt.Errorf("%*d %s", 3, 4, ctxErr)
	_ = fmt.Errorf("%+v", errors.New("x"))
	return fmt.Errorf("ok %w %v %s %[1]v", err, 7, err.Error())
}`, checkBanned, []string{"func init()", "environment read outside cmd", "panic with a string", "applies %v", "applies %s", "applies %v"}},
		{"generated code is the generator's", "agent/api", "a.pb.go", "// Code generated by protoc-gen-go. DO NOT EDIT.\n\npackage api\nfunc init() {}",
			checkBanned, nil},
		{"comments stay in the repository", "volume", "a.go", "// See docs/architecture.md, not ../x.md\n// nor /work/shared/DESIGN.md.\n" +
			"// Measured (toolchain.md); see README.md, style.md and nbd's doc/proto.md.\npackage volume",
			checkCommentPaths, []string{`"../"`, `"/work/"`, `"toolchain.md"`}},
		{"tracker references in comments", "volume", "a_test.go", "// Fixed for issue 16 (issue 17), issues #3 and 4.\n" +
			"// The issue's scenario; see Issue N.\n// It issues 3 reads, then issues 2.\npackage volume\nvar _ = \"issue 5\"",
			checkTrackerComments, []string{`"issue 16"`, `"(issue"`, `"issues #3 and"`, `"The issue"`, `"Issue N"`}},
		{"cmd may read the environment", "cmd/nvstripe", "a.go", `package main
import "os"
var _ = os.Getenv("HOME")`, checkBanned, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.check(parseSource(t, tt.pkg, tt.file, tt.src))
			if len(got) != len(tt.want) {
				t.Fatalf("got %d violations, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}

func TestChecksDocs(t *testing.T) {
	files := []goFile{
		parseSource(t, "a", "a.go", "// Package a does a.\npackage a"),
		parseSource(t, "a", "b.go", "package a"),
		parseSource(t, "b", "b.go", "package b"),
		parseSource(t, "b", "doc_test.go", "// Package b tests.\npackage b"),
	}
	got := checkDocs(files)
	if len(got) != 1 || !strings.Contains(got[0], "package b has no doc comment") {
		t.Errorf("checkDocs = %q, want one violation for package b", got)
	}
}
