package health

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// Key sizes memberlist accepts: AES-128, AES-192 or AES-256.
var keySizes = []int{16, 24, 32}

// ReadKeyFile reads a gossip encryption key: the base64 of 16, 24 or 32
// random bytes, alone in the file (surrounding white space ignored), as
// `head -c 32 /dev/urandom | base64 > gossip.key` makes one.
func ReadKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("gossip key %s: not base64: %w", path, ErrInvalid)
	}
	if err := checkKey(key); err != nil || len(key) == 0 {
		return nil, fmt.Errorf("gossip key %s: %d bytes, want 16, 24 or 32: %w", path, len(key), ErrInvalid)
	}
	return key, nil
}

// checkKey accepts no key or one of keySizes bytes.
func checkKey(key []byte) error {
	for _, n := range append([]int{0}, keySizes...) {
		if len(key) == n {
			return nil
		}
	}
	return fmt.Errorf("%d bytes, want 16, 24 or 32: %w", len(key), ErrInvalid)
}
