package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// ErrUsage marks an operator's mistake in a flag or a setting (a flag
// group's check failed; the command line exits with status 2). Usage marks
// an error with it; IsUsage also counts ErrSecret.
var ErrUsage = errors.New("usage mistake")

// Usage marks err as an operator's mistake (ErrUsage) without changing its
// text; nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

type usageError struct{ error }

func (e usageError) Unwrap() []error { return []error{e.error, ErrUsage} }

// IsUsage says whether err is an operator's mistake in a flag or a setting:
// ErrUsage or ErrSecret.
func IsUsage(err error) bool { return errors.Is(err, ErrUsage) || errors.Is(err, ErrSecret) }

// EtcdFlags are the etcd connection flags of every command that reaches
// etcd (the endpoints, --etcd, are the command line's root flag): the
// cluster, TLS, credentials and the dial timeout.
type EtcdFlags struct {
	Cluster string
	TLSFiles
	User, PasswordFile string
	PasswordArg        string // the removed --etcd-password, refused
	Timeout            time.Duration
}

// AddFlags defines the flags on fl.
func (e *EtcdFlags) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&e.Cluster, "cluster", "default", "cluster name (its keys live under /nvstripe/NAME/; env NVSTRIPE_CLUSTER)")
	fl.StringVar(&e.CACert, "etcd-cacert", "", "CA certificate file to verify etcd's TLS certificate (enables TLS; env NVSTRIPE_ETCD_CACERT)")
	fl.StringVar(&e.Cert, "etcd-cert", "", "client certificate file for etcd TLS (env NVSTRIPE_ETCD_CERT)")
	fl.StringVar(&e.Key, "etcd-key", "", "client key file for etcd TLS (env NVSTRIPE_ETCD_KEY)")
	fl.BoolVar(&e.InsecureSkipVerify, "etcd-insecure-skip-verify", false, "use TLS without verifying etcd's certificate (testing only)")
	fl.StringVar(&e.User, "etcd-user", "", "etcd user name (password from $"+PasswordEnv+" or --etcd-password-file)")
	fl.StringVar(&e.PasswordFile, "etcd-password-file", "", "file holding the etcd password (one line; else $"+PasswordEnv+")")
	fl.StringVar(&e.PasswordArg, "etcd-password", "", "removed: a password in argv is visible to every local user")
	fl.MarkHidden("etcd-password")
	fl.DurationVar(&e.Timeout, "etcd-timeout", 5*time.Second, "how long to wait for etcd to answer at first")
}

// Client returns the TLS configuration (nil for plain connections) and the
// password ("" without --etcd-user; EtcdCredentials). passwordEnv is the
// value of $NVSTRIPE_ETCD_PASSWORD: the caller reads the environment.
func (e *EtcdFlags) Client(passwordEnv string) (*tls.Config, string, error) {
	tc, err := e.TLSFiles.TLS()
	if errors.Is(err, ErrTLSPair) {
		return nil, "", Usage(fmt.Errorf("--etcd-cert and --etcd-key go together"))
	} else if err != nil {
		return nil, "", err
	}
	pw, err := EtcdCredentials{User: e.User, PasswordFile: e.PasswordFile, PasswordArg: e.PasswordArg, PasswordEnv: passwordEnv}.Password()
	return tc, pw, err
}

// FlagSet adapts a command's flags for Apply: a flag is given when the
// command line set it.
func FlagSet(fs *pflag.FlagSet) Flags { return pflagSet{fs} }

type pflagSet struct{ fs *pflag.FlagSet }

func (p pflagSet) Given(name string) (string, bool) {
	if f := p.fs.Lookup(name); f != nil && f.Changed {
		return f.Value.String(), true
	}
	return "", false
}

func (p pflagSet) Default(name, value string) error {
	if f := p.fs.Lookup(name); f != nil && !f.Changed {
		return f.Value.Set(value)
	}
	return nil
}
