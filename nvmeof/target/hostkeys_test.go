package target

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nvstripe/nvstripe/nvmeof/auth"
)

func TestReadHostKeys(t *testing.T) {
	s1, err := auth.GenerateSecret(rand.Reader, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := auth.GenerateSecret(rand.Reader, 0, 32)
	good, bad := s1.String(), s2.String()
	tests := []struct {
		name, text string
		want       []HostKey
		spec       bool
	}{
		{"one host", "nqn.a " + good + "\n", []HostKey{{HostNQN: "nqn.a", Secret: good}}, false},
		{"comments and blanks", "# hosts\n\nnqn.a " + good + " " + bad + " # both ways\n",
			[]HostKey{{HostNQN: "nqn.a", Secret: good, CtrlSecret: bad}}, false},
		{"missing secret", "nqn.a\n", nil, true},
		{"too many fields", "nqn.a " + good + " " + good + " x\n", nil, true},
		{"not a secret", "nqn.a DHHC-1:00:nonsense:\n", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "keys")
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadHostKeys(p)
			if tc.spec {
				if !errors.Is(err, ErrSpec) {
					t.Fatalf("err %v, want ErrSpec", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := ReadHostKeys(filepath.Join(t.TempDir(), "absent")); err == nil || errors.Is(err, ErrSpec) {
		t.Fatalf("absent file: %v, want an IO error", err)
	}
}
