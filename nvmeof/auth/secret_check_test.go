package auth

import (
	"crypto/rand"
	"errors"
	"testing"
)

func TestCheckSecrets(t *testing.T) {
	s, err := GenerateSecret(rand.Reader, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSecrets(s.String(), ""); err != nil {
		t.Fatalf("a secret and none: %v", err)
	}
	if err := CheckSecrets(s.String(), "DHHC-1:09:xx:"); !errors.Is(err, ErrSecret) {
		t.Fatalf("a bad controller secret: %v, want ErrSecret", err)
	}
}
