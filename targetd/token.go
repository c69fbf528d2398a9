package targetd

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/nvstripe/nvstripe/config"
)

// ControlTokenName is the control token file `target serve --control`
// keeps in its --dir when no --control-token-file is given, and where
// `target ana-state --dir` looks for it.
const ControlTokenName = "control.token"

// EnsureControlToken returns the control token kept in the file path,
// creating the file (mode 0600: root only for a root daemon; 32 random
// bytes in hex) when it is missing. An existing file must be readable by
// its owner only (a usage mistake otherwise) and hold the token on its
// first line.
func EnsureControlToken(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		st, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("control token: %w", err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("control token %s has mode %v, want 0600 (readable by its owner only): %w",
				path, st.Mode().Perm(), config.ErrSecret)
		}
		return config.ReadSecretFile("control token", path)
	}
	if err != nil {
		return "", fmt.Errorf("control token: %w", err)
	}
	token := hex.EncodeToString(randomBytes(32))
	_, err = f.WriteString(token + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // half written: the next start writes a new one
		return "", fmt.Errorf("control token %s: %w", path, err)
	}
	return token, nil
}

// randomBytes returns n bytes from crypto/rand (which does not fail on
// Linux).
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
