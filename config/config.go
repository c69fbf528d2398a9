// Package config resolves the settings every nvstripe command shares (etcd
// endpoints and TLS files, the cluster name, the host NQN) from four layers:
// a command-line flag beats an environment variable, which beats the config
// file (/etc/nvstripe/nvstripe.yaml), which beats the built-in default.
// Resolve records where each value came from, for `nvstripe config show`.
//
// The package reads files but not the environment: the caller (cmd) passes
// the variables in, so that only cmd depends on the process environment.
package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/nvstripe/nvstripe/internal/tlsfiles"
)

// DefaultPath is the config file read when neither --config nor
// NVSTRIPE_CONFIG names one.
const DefaultPath = "/etc/nvstripe/nvstripe.yaml"

// PathEnv names the environment variable that overrides DefaultPath.
const PathEnv = "NVSTRIPE_CONFIG"

// Setting is one shared setting: its key in `config show`, the flag and the
// environment variable that set it, and its default.
type Setting struct {
	Key     string // e.g. "etcd.endpoints"
	Flag    string // e.g. "etcd"
	Env     string // e.g. "NVSTRIPE_ETCD"
	Default string
}

// Settings lists the shared settings in the order `config show` prints them.
var Settings = []Setting{
	{Key: "etcd.endpoints", Flag: "etcd", Env: "NVSTRIPE_ETCD", Default: "127.0.0.1:2379"},
	{Key: "etcd.cacert", Flag: "etcd-cacert", Env: "NVSTRIPE_ETCD_CACERT"},
	{Key: "etcd.cert", Flag: "etcd-cert", Env: "NVSTRIPE_ETCD_CERT"},
	{Key: "etcd.key", Flag: "etcd-key", Env: "NVSTRIPE_ETCD_KEY"},
	{Key: "cluster", Flag: "cluster", Env: "NVSTRIPE_CLUSTER", Default: "default"},
	{Key: "host_nqn", Flag: "host-nqn", Env: "NVSTRIPE_HOST_NQN"},
	{Key: "admin.controller", Flag: "controller", Env: "NVSTRIPE_CONTROLLER"},
	{Key: "admin.tls_cert", Flag: "admin-tls-cert", Env: "NVSTRIPE_ADMIN_TLS_CERT"},
	{Key: "admin.tls_key", Flag: "admin-tls-key", Env: "NVSTRIPE_ADMIN_TLS_KEY"},
	{Key: "admin.tls_ca", Flag: "admin-tls-ca", Env: "NVSTRIPE_ADMIN_TLS_CA"},
}

// File is the config file's schema. Unknown keys are an error, so that a
// misspelt key does not silently fall back to a default.
type File struct {
	Etcd struct {
		Endpoints []string `json:"endpoints"`
		CACert    string   `json:"cacert"`
		Cert      string   `json:"cert"`
		Key       string   `json:"key"`
	} `json:"etcd"`
	Cluster string `json:"cluster"`
	HostNQN string `json:"host_nqn"`
	// Admin is how `nvstripe admin` reaches a controller's admin API (and
	// the controller's own TLS files, when it serves on TCP).
	Admin struct {
		Controller string `json:"controller"`
		TLSCert    string `json:"tls_cert"`
		TLSKey     string `json:"tls_key"`
		TLSCA      string `json:"tls_ca"`
	} `json:"admin"`
}

// values returns the file's settings by key; unset ones are absent.
func (f *File) values() map[string]string {
	m := map[string]string{"etcd.endpoints": strings.Join(f.Etcd.Endpoints, ","), "etcd.cacert": f.Etcd.CACert,
		"etcd.cert": f.Etcd.Cert, "etcd.key": f.Etcd.Key, "cluster": f.Cluster, "host_nqn": f.HostNQN,
		"admin.controller": f.Admin.Controller, "admin.tls_cert": f.Admin.TLSCert, "admin.tls_key": f.Admin.TLSKey, "admin.tls_ca": f.Admin.TLSCA}
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// ReadFile reads and checks the config file at path. A missing file is
// no error unless required (the operator named it).
func ReadFile(path string, required bool) (*File, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !required {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if err := f.trimEndpoints(); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return &f, nil
}

// trimEndpoints trims the spaces around each etcd endpoint and refuses a
// blank one or one with a comma: the list is in force joined by commas, as
// --etcd takes it, so either would silently become other endpoints.
func (f *File) trimEndpoints() error {
	for i, e := range f.Etcd.Endpoints {
		e = strings.TrimSpace(e)
		if e == "" || strings.Contains(e, ",") {
			return fmt.Errorf("etcd.endpoints entry %d is %q: give one endpoint per entry", i+1, f.Etcd.Endpoints[i])
		}
		f.Etcd.Endpoints[i] = e
	}
	return nil
}

// Load finds the config file (path if set, else the one $NVSTRIPE_CONFIG
// names, else DefaultPath, which alone may be missing), reads it and
// resolves every Setting over flags (the flags given, by name) and env. It
// returns the values and the file read ("" when none was).
func Load(path string, flags map[string]string, env func(string) (string, bool)) ([]Value, string, error) {
	required := true
	if path == "" {
		path, _ = lookup(env, PathEnv)
	}
	if path == "" {
		path, required = DefaultPath, false
	}
	f, err := ReadFile(path, required)
	if err != nil {
		return nil, "", err
	}
	if f == nil {
		path = ""
	}
	return Resolve(Layers{Flags: flags, Env: env, File: f, FilePath: path}), path, nil
}

// Value is a resolved setting and where it came from: "flag --etcd",
// "env NVSTRIPE_ETCD", "file PATH" or "default".
type Value struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// SourceOf is where the setting key of vs came from ("default", "flag
// --etcd", ...), or "" when vs lacks it.
func SourceOf(vs []Value, key string) string {
	for _, v := range vs {
		if v.Key == key {
			return v.Source
		}
	}
	return ""
}

// WithDefault returns a copy of vs in which the setting key, when it was
// left at its built-in default, takes value from source instead: a default
// that depends on the machine and that only the caller can find (the
// node's host NQN in /etc/nvme/hostnqn). A setting given by a flag, the
// environment or the file is kept.
func WithDefault(vs []Value, key, value, source string) []Value {
	out := slices.Clone(vs)
	for i, v := range out {
		if v.Key == key && v.Source == "default" {
			out[i].Value, out[i].Source = value, source
		}
	}
	return out
}

// Layers are the inputs of Resolve.
type Layers struct {
	Flags    map[string]string // set flags by flag name (only those given on the command line)
	Env      func(string) (string, bool)
	File     *File // nil: no file
	FilePath string
}

// Resolve returns every Setting's value, highest layer first.
func Resolve(l Layers) []Value {
	var file map[string]string
	if l.File != nil {
		file = l.File.values()
	}
	out := make([]Value, 0, len(Settings))
	for _, s := range Settings {
		v := Value{Key: s.Key, Value: s.Default, Source: "default"}
		if fv, ok := l.Flags[s.Flag]; ok {
			v.Value, v.Source = fv, "flag --"+s.Flag
		} else if ev, ok := lookup(l.Env, s.Env); ok {
			v.Value, v.Source = ev, "env "+s.Env
		} else if fv, ok := file[s.Key]; ok {
			v.Value, v.Source = fv, "file "+l.FilePath
		}
		out = append(out, v)
	}
	return out
}

func lookup(env func(string) (string, bool), name string) (string, bool) {
	if env == nil {
		return "", false
	}
	v, ok := env(name)
	return v, ok && v != ""
}

// SplitList splits a comma-separated list (etcd endpoints), dropping
// blanks.
func SplitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// TLSFiles name the PEM files of an etcd TLS connection.
type TLSFiles struct {
	CACert, Cert, Key  string
	InsecureSkipVerify bool
}

// ErrTLSPair is returned when only one of a certificate and its key is set.
var ErrTLSPair = errors.New("the etcd client certificate and key go together")

// TLS builds the client TLS configuration, or nil (plain connections) when
// no file is named and verification is not turned off.
func (t TLSFiles) TLS() (*tls.Config, error) {
	if t.CACert == "" && t.Cert == "" && t.Key == "" && !t.InsecureSkipVerify {
		return nil, nil
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, ErrTLSPair
	}
	cfg, err := tlsfiles.Files{Cert: t.Cert, Key: t.Key, CA: t.CACert}.Client()
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS: %w", err)
	}
	cfg.InsecureSkipVerify = t.InsecureSkipVerify
	return cfg, nil
}

// Flags are a command's flags as Apply sees them.
type Flags interface {
	// Given returns the value of flag when the command line gave it.
	Given(flag string) (value string, ok bool)
	// Default sets flag, when the command has it and the command line
	// did not give it, to value.
	Default(flag, value string) error
}

// Apply resolves every Setting (Load) over the flags the command line
// gave, then sets each other flag that names one to its resolved value.
func Apply(path string, fl Flags, env func(string) (string, bool)) ([]Value, string, error) {
	given := map[string]string{}
	for _, s := range Settings {
		if v, ok := fl.Given(s.Flag); ok {
			given[s.Flag] = v
		}
	}
	vs, file, err := Load(path, given, env)
	if err != nil {
		return nil, "", err
	}
	for i, s := range Settings {
		if err := fl.Default(s.Flag, vs[i].Value); err != nil {
			return nil, "", fmt.Errorf("%s (%s): %w", s.Key, vs[i].Source, err)
		}
	}
	return vs, file, nil
}
