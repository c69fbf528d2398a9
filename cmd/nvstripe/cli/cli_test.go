package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/buildinfo"
)

// run calls Run in-process and returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{nil, {"--help"}, {"help"}} {
		out, _, err := run(t, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		for _, want := range []string{"version", "selftest", "--etcd", "127.0.0.1:2379"} {
			if !strings.Contains(out, want) {
				t.Errorf("%q output does not mention %q:\n%s", args, want, out)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "nvstripe ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version printed %q, want 'nvstripe <version> ... %s ...'", out, runtime.Version())
	}
	out, _, err = run(t, "version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v buildinfo.Info
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("version --json printed %q: %v", out, err)
	}
	if v.Go != runtime.Version() || v.Version == "" || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version --json = %+v", v)
	}
}

func TestSelfTestCommand(t *testing.T) {
	out, _, err := run(t, "selftest")
	if err != nil || !strings.HasPrefix(out, "ec self-test: ok") {
		t.Errorf("selftest = %q, %v", out, err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"version", "--bogus"}, {"version", "extra"}, {"--etcd"}, {"version", "--log-format", "xml"}, {"version", "--log-level", "loud"}} {
		_, _, err := run(t, args...)
		if err == nil {
			t.Errorf("%q: no error", args)
			continue
		}
		if code := ExitCode(err); code != 2 {
			t.Errorf("%q: ExitCode(%v) = %d, want 2", args, err, code)
		}
	}
	if got := ExitCode(nil); got != 0 {
		t.Errorf("ExitCode(nil) = %d", got)
	}
	if got := ExitCode(context.Canceled); got != 130 {
		t.Errorf("ExitCode(context.Canceled) = %d", got)
	}
}

// TestArgCountErrorsShowUsage: a wrong number of arguments names the
// command and shows its usage line, not only cobra's count.
func TestArgCountErrorsShowUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"volume", "settle"}, "volume settle: accepts 1 arg(s), received 0; usage: nvstripe volume settle NAME"},
		{[]string{"ns", "discover", "a", "b"}, "ns discover: accepts 1 arg(s), received 2; usage: nvstripe ns discover tcp://ADDR:PORT --host H"},
		{[]string{"version", "extra"}, "version: unknown command \"extra\""},
	} {
		_, _, err := run(t, c.args...)
		if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v (exit %d), want exit 2 and %q", c.args, err, ExitCode(err), c.want)
		}
	}
}

func TestEtcdFlag(t *testing.T) {
	f := newRootCmd().PersistentFlags().Lookup("etcd")
	if f == nil || f.DefValue != "127.0.0.1:2379" {
		t.Fatalf("--etcd flag = %+v, want default 127.0.0.1:2379", f)
	}
	if got := config.SplitList(" a:1, b:2,,"); !slices.Equal(got, []string{"a:1", "b:2"}) {
		t.Errorf("SplitList = %q", got)
	}
}

// TestCommandsDocumented keeps --help true: every command has a usage line
// and a short description.
func TestCommandsDocumented(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Use == "" || c.Short == "" {
			t.Errorf("command %q has no Use or Short", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// TestMisspeltSubcommand walks every command group: a misspelt subcommand
// is a usage error that suggests the right one, and it is reported before
// any flag the intended subcommand has but the group lacks.
func TestMisspeltSubcommand(t *testing.T) {
	var groups []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			groups = append(groups, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	for _, g := range groups {
		for _, sub := range g.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			typo := misspell(sub.Name())
			if c, _, _ := newRootCmd().Find(append(pathArgs(g), typo)); c.CommandPath() != g.CommandPath() {
				continue // the misspelling names another command
			}
			args := append(pathArgs(g), typo, "x", "--no-such-flag", "1")
			_, _, err := run(t, args...)
			want := fmt.Sprintf("unknown command %q", typo)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), strconv.Quote(sub.Name())) {
				t.Errorf("%q: %v, want %s suggesting %q", args, err, want, sub.Name())
			} else if code := ExitCode(err); code != 2 {
				t.Errorf("%q: exit status %d, want 2", args, code)
			}
		}
	}
	_, _, err := run(t, "volume", "crate", "vz", "--size", "10GiB")
	if want := `unknown command "crate" for "nvstripe volume"; did you mean "create"?`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("volume crate vz --size 10GiB: %v, want %s", err, want)
	}
	if _, _, err := run(t, "volume", "--no-such-flag"); err == nil || !strings.Contains(err.Error(), "unknown flag: --no-such-flag") {
		t.Errorf("volume --no-such-flag: %v, want the unknown flag", err)
	}
}

// misspell drops the second letter of name (one edit), or adds one to a
// name that short.
func misspell(name string) string {
	if len(name) < 3 {
		return name + "x"
	}
	return name[:1] + name[2:]
}

// pathArgs is the words that name c on the command line.
func pathArgs(c *cobra.Command) []string {
	return strings.Fields(c.CommandPath())[1:]
}
