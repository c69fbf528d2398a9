package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// unitDir holds the systemd units and their examples.
const unitDir = "systemd"

// units are the units shipped, each with the instance name a test gives a
// template unit.
var units = []string{"nvstripe-agent.service", "nvstripe-controller.service", "nvstripe-etcd.service", "nvstripe-target@t1.service"}

// unitFile is a unit file as key → values per section; a key given twice
// keeps both values, in order.
type unitFile map[string]map[string][]string

// readUnit parses the unit file of name (a template's for an instance).
func readUnit(t *testing.T, name string) unitFile {
	t.Helper()
	file := name
	if at := strings.Index(name, "@"); at >= 0 {
		file = name[:at+1] + name[strings.LastIndex(name, "."):]
	}
	b, err := os.ReadFile(filepath.Join(unitDir, file))
	if err != nil {
		t.Fatal(err)
	}
	u, section := unitFile{}, ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: cannot read line %q", file, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// get is the last value of key in section, "" when unset.
func (u unitFile) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// list is every space-separated word of key's values in section.
func (u unitFile) list(section, key string) []string {
	var out []string
	for _, v := range u[section][key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

// binDir holds the nvstripe binary the tests build once (binary).
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nvstripe-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// built guards the one build of the nvstripe binary into binDir.
var built sync.Once

// binary is the nvstripe binary, built at the first call.
func binary(t *testing.T) string {
	t.Helper()
	built.Do(func() { testutil.BuildNvstripe(t, binDir) })
	bin := filepath.Join(binDir, "nvstripe")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no nvstripe binary (the first test's build failed or was skipped): %v", err)
	}
	return bin
}

// unitRoot is a file system root for systemd-analyze --root: the units in
// /etc/systemd/system, the examples of their environment files in
// /etc/nvstripe and the real binary at the path ExecStart names.
func unitRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"usr/local/bin", "etc/systemd/system", "etc/nvstripe"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, binary(t), filepath.Join(root, "usr/local/bin/nvstripe"), 0o755)
	files, err := filepath.Glob(filepath.Join(unitDir, "*.service"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no units in %s: %v", unitDir, err)
	}
	files = append(files, filepath.Join(unitDir, "target-t1.env"))
	for _, f := range files {
		to := filepath.Join(root, "etc/systemd/system", filepath.Base(f))
		if strings.HasSuffix(f, ".env") {
			to = filepath.Join(root, "etc/nvstripe", filepath.Base(f))
		}
		copyFile(t, f, to, 0o644)
	}
	return root
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// systemdTool finds a systemd program, skipping t without it.
func systemdTool(t *testing.T, name string, paths ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skipf("%s not found: install Debian's systemd package to check the units", name)
	return ""
}

// verify runs systemd-analyze verify on unit under root and fails t on any
// complaint, warnings included.
func verify(t *testing.T, root, unit string) {
	t.Helper()
	tool := systemdTool(t, "systemd-analyze", "/usr/bin/systemd-analyze")
	out, err := exec.Command(tool, "verify", "--man=no", "--recursive-errors=no", "--root="+root, unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}
}

// TestUnitsVerify: systemd-analyze verify accepts every unit (instance t1
// of the target's template) with no warning, against the real binary.
func TestUnitsVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary")
	}
	systemdTool(t, "systemd-analyze", "/usr/bin/systemd-analyze")
	root := unitRoot(t)
	for _, u := range units {
		verify(t, root, u)
	}
}

// TestUnitsRunDaemons: each unit runs an nvstripe daemon as Type=notify
// (the daemons send READY=1 only once they serve, TestNotifyProcess),
// restarts it with no start limit, raises its limits, and starts it with flags the binary
// takes: ExecStart, with %i and the example environment file expanded and
// --help added, exits 0 (an unknown flag exits 2).
func TestUnitsRunDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary")
	}
	bin := binary(t)
	for _, name := range units {
		u := readUnit(t, name)
		for key, want := range map[string]string{"Type": "notify", "Restart": "always", "LimitNOFILE": "1048576"} {
			if got := u.get("Service", key); got != want {
				t.Errorf("%s: %s=%q, want %q", name, key, got, want)
			}
		}
		if got := u.get("Unit", "StartLimitIntervalSec"); got != "0" {
			t.Errorf("%s: StartLimitIntervalSec=%q, want 0: a daemon that starts before etcd is reachable must keep being restarted", name, got)
		}
		args := execArgs(t, name, u)
		if args[0] != "/usr/local/bin/nvstripe" {
			t.Errorf("%s: ExecStart runs %s, want /usr/local/bin/nvstripe", name, args[0])
			continue
		}
		cmd := exec.Command(bin, append(args[1:], "--help")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %q: %v\n%s", name, cmd.Args, err, out)
		}
	}
}

// execArgs is the unit's ExecStart as systemd would run it for instance t1:
// %i replaced, $VAR split into words from the example environment file.
func execArgs(t *testing.T, name string, u unitFile) []string {
	t.Helper()
	env := map[string]string{}
	if f := u.get("Service", "EnvironmentFile"); f != "" && !strings.HasPrefix(f, "-") {
		env = readEnv(t, filepath.Join(unitDir, filepath.Base(strings.ReplaceAll(f, "%i", "t1"))))
	}
	var args []string
	for _, w := range strings.Fields(u.get("Service", "ExecStart")) {
		w = strings.ReplaceAll(w, "%i", "t1")
		if v, ok := strings.CutPrefix(w, "$"); ok {
			args = append(args, strings.Fields(env[v])...)
			continue
		}
		args = append(args, w)
	}
	if len(args) == 0 {
		t.Fatalf("%s: no ExecStart", name)
	}
	return args
}

// readEnv reads an environment file of KEY="VALUE" lines.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = strings.Trim(v, `"`)
		}
	}
	return env
}

// TestFstabNeedsAgent: systemd's own fstab generator turns the fstab
// example into a remote mount (_netdev: pulled in by remote-fs.target,
// after remote-fs-pre.target) that requires and follows the agent, whose
// unit comes before remote-fs-pre.target; systemd-analyze verify accepts
// the generated mount with the units beside it.
func TestFstabNeedsAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary")
	}
	gen := systemdTool(t, "systemd-fstab-generator", "/usr/lib/systemd/system-generators/systemd-fstab-generator",
		"/lib/systemd/system-generators/systemd-fstab-generator")
	fstab, err := filepath.Abs(filepath.Join(unitDir, "fstab.example"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(gen, out, out, out)
	cmd.Env = append(os.Environ(), "SYSTEMD_FSTAB="+fstab)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", gen, err, b)
	}
	const mount = "mnt-ckpt.mount"
	if _, err := os.Lstat(filepath.Join(out, "remote-fs.target.wants", mount)); err != nil {
		t.Errorf("the example's mount is not a remote (_netdev) mount: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(out, mount))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Requires=nvstripe-agent.service", "After=nvstripe-agent.service"} {
		if !slices.Contains(strings.Split(string(b), "\n"), want) {
			t.Errorf("generated %s lacks %s:\n%s", mount, want, b)
		}
	}
	agent := readUnit(t, "nvstripe-agent.service")
	if !slices.Contains(agent.list("Unit", "Before"), "remote-fs-pre.target") || !slices.Contains(agent.list("Unit", "Wants"), "remote-fs-pre.target") {
		t.Errorf("nvstripe-agent.service must have Before= and Wants=remote-fs-pre.target, so _netdev mounts come after it: %v", agent["Unit"])
	}
	root := unitRoot(t)
	copyFile(t, filepath.Join(out, mount), filepath.Join(root, "etc/systemd/system", mount), 0o644)
	verify(t, root, mount)
}

// TestExampleConfig: the example /etc/nvstripe/nvstripe.yaml parses
// strictly (an unknown key would be an error at every start).
func TestExampleConfig(t *testing.T) {
	f, err := config.ReadFile(filepath.Join(unitDir, "nvstripe.yaml"), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Etcd.Endpoints) == 0 {
		t.Error("the example names no etcd endpoints")
	}
}
