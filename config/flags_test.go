package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// parse defines e's flags on a new set and parses args.
func parse(t *testing.T, e *EtcdFlags, args ...string) *pflag.FlagSet {
	t.Helper()
	fl := pflag.NewFlagSet("test", pflag.ContinueOnError)
	e.AddFlags(fl)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fl
}

// TestEtcdFlags: the defaults, a password from its file, and the usage
// mistakes (a certificate without its key, a password in argv).
func TestEtcdFlags(t *testing.T) {
	var e EtcdFlags
	parse(t, &e)
	if e.Cluster != "default" || e.Timeout != 5*time.Second {
		t.Errorf("defaults: %+v", e)
	}
	if tc, pw, err := e.Client("from-env"); tc != nil || pw != "" || err != nil {
		t.Errorf("no TLS, no user: %v %q %v", tc, pw, err)
	}
	file := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(file, []byte("s3cret\n"), 0o600)
	e = EtcdFlags{}
	parse(t, &e, "--etcd-user", "root", "--etcd-password-file", file)
	if _, pw, err := e.Client("from-env"); pw != "s3cret" || err != nil {
		t.Errorf("password file: %q %v", pw, err)
	}
	e = EtcdFlags{}
	parse(t, &e, "--etcd-cert", "c.pem")
	if _, _, err := e.Client(""); !IsUsage(err) || err.Error() != "--etcd-cert and --etcd-key go together" {
		t.Errorf("cert without key: %v, want a usage mistake", err)
	}
	e = EtcdFlags{}
	parse(t, &e, "--etcd-user", "root", "--etcd-password", "x")
	if _, _, err := e.Client(""); !IsUsage(err) {
		t.Errorf("--etcd-password: %v, want a usage mistake", err)
	}
}

// TestUsage: Usage marks without changing the text; IsUsage also counts
// ErrSecret; nil stays nil.
func TestUsage(t *testing.T) {
	cause := errors.New("--x: bad")
	err := Usage(cause)
	if !IsUsage(err) || !errors.Is(err, cause) || err.Error() != "--x: bad" {
		t.Errorf("Usage: %v", err)
	}
	if Usage(nil) != nil || IsUsage(cause) || !IsUsage(ErrSecret) {
		t.Error("Usage(nil), IsUsage of a plain error or of ErrSecret wrong")
	}
}

// TestFlagSetApply: through FlagSet, a flag given on the command line is
// its setting's source; one not given takes the environment's value.
func TestFlagSetApply(t *testing.T) {
	var e EtcdFlags
	fl := parse(t, &e, "--cluster", "given")
	file := filepath.Join(t.TempDir(), "nvstripe.yaml")
	os.WriteFile(file, []byte("cluster: fromfile\n"), 0o600)
	env := map[string]string{"NVSTRIPE_CLUSTER": "ignored", "NVSTRIPE_ETCD_CERT": "env.pem"}
	vs, _, err := Apply(file, FlagSet(fl), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if e.Cluster != "given" || SourceOf(vs, "cluster") != "flag --cluster" || e.Cert != "env.pem" || SourceOf(vs, "etcd.cert") != "env NVSTRIPE_ETCD_CERT" {
		t.Errorf("cluster %q (%s), cert %q (%s)", e.Cluster, SourceOf(vs, "cluster"), e.Cert, SourceOf(vs, "etcd.cert"))
	}
}
