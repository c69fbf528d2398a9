package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrSecret marks a secret given the wrong way (an empty file, a password
// without a user, a password in argv): a usage mistake, not an IO failure.
var ErrSecret = errors.New("secret misconfigured")

// PasswordEnv names the environment variable with the etcd password.
const PasswordEnv = "NVSTRIPE_ETCD_PASSWORD"

// ReadSecretFile reads a secret kept in a file: its first line, trimmed.
// Secrets (passwords, tokens, keys) never come from argv. flag names the
// option in errors; "" for no file.
func ReadSecretFile(flag, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("%s %s is empty: %w", flag, path, ErrSecret)
	}
	return line, nil
}

// EtcdCredentials are the ways an etcd password may be given.
type EtcdCredentials struct {
	User         string // --etcd-user
	PasswordFile string // --etcd-password-file
	PasswordArg  string // the removed --etcd-password: refused when set
	PasswordEnv  string // the value of $NVSTRIPE_ETCD_PASSWORD
}

// Password returns the etcd password, "" when no user is set. A password
// in argv is refused (not merely deprecated): every use of it leaks it to
// ps, /proc/PID/cmdline and shell history.
func (c EtcdCredentials) Password() (string, error) {
	if c.PasswordArg != "" {
		return "", fmt.Errorf("--etcd-password is no longer accepted (argv is visible to every local user): "+
			"set $%s or use --etcd-password-file: %w", PasswordEnv, ErrSecret)
	}
	pw := c.PasswordEnv
	if c.PasswordFile != "" {
		p, err := ReadSecretFile("--etcd-password-file", c.PasswordFile)
		if err != nil {
			return "", err
		}
		pw = p
	}
	switch {
	case c.User == "" && c.PasswordFile != "":
		return "", fmt.Errorf("--etcd-password-file needs --etcd-user: %w", ErrSecret)
	case c.User == "":
		return "", nil // $NVSTRIPE_ETCD_PASSWORD alone does not turn auth on
	case pw == "":
		return "", fmt.Errorf("--etcd-user needs a password: set $%s or use --etcd-password-file: %w", PasswordEnv, ErrSecret)
	}
	return pw, nil
}
