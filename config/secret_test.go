package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestEtcdPassword(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(file, []byte("s3cret\nignored\n"), 0o600)
	os.WriteFile(empty, []byte("\n"), 0o600)
	tests := []struct {
		name   string
		c      EtcdCredentials
		want   string
		secret bool // a usage mistake (ErrSecret)
	}{
		{"no user, no password", EtcdCredentials{}, "", false},
		{"env alone does not turn auth on", EtcdCredentials{PasswordEnv: "x"}, "", false},
		{"user and env", EtcdCredentials{User: "root", PasswordEnv: "x"}, "x", false},
		{"file beats env", EtcdCredentials{User: "root", PasswordEnv: "x", PasswordFile: file}, "s3cret", false},
		{"argv refused", EtcdCredentials{User: "root", PasswordArg: "x"}, "", true},
		{"file without user", EtcdCredentials{PasswordFile: file}, "", true},
		{"user without password", EtcdCredentials{User: "root"}, "", true},
		{"empty file", EtcdCredentials{User: "root", PasswordFile: empty}, "", true},
	}
	for _, tc := range tests {
		got, err := tc.c.Password()
		if tc.secret != errors.Is(err, ErrSecret) || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q (usage mistake %v)", tc.name, got, err, tc.want, tc.secret)
		}
	}
	if _, err := ReadSecretFile("--x", filepath.Join(dir, "absent")); err == nil || errors.Is(err, ErrSecret) {
		t.Errorf("absent file: %v, want an IO error", err)
	}
}
