package health

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// keyedNode starts a target member h with key and label.
func keyedNode(t *testing.T, host string, key []byte, label string, log *eventLog) *Node {
	t.Helper()
	n, err := Start(Config{Meta: Meta{Role: RoleTarget, Host: host}, Profile: ProfileTest, Key: key, Label: label,
		OnEvent: log.add, Logf: testLogf(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	return n
}

// TestGossipKeyAndLabel: two members with a key and a label form a pool;
// members without the key, with another key, or with the key but another
// cluster's label can neither join it nor be joined by it, and the pool
// never hears of them.
func TestGossipKeyAndLabel(t *testing.T) {
	key, other := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 16)
	logs := []*eventLog{{}, {}}
	a := keyedNode(t, "a", key, "nvstripe/c1", logs[0])
	b := keyedNode(t, "b", key, "nvstripe/c1", logs[1])
	if _, err := b.Join([]string{a.Addr()}); err != nil {
		t.Fatalf("same key and label: %v", err)
	}
	waitFor(t, "a and b to see each other", func() bool { return len(a.Members()) == 2 && len(b.Members()) == 2 })

	intruders := map[string]struct {
		key   []byte
		label string
	}{"nokey": {nil, "nvstripe/c1"}, "wrongkey": {other, "nvstripe/c1"}, "otherlabel": {key, "nvstripe/c2"}, "bare": {nil, ""}}
	for host, in := range intruders {
		x := keyedNode(t, host, in.key, in.label, &eventLog{})
		if n, err := x.Join([]string{a.Addr()}); err == nil {
			t.Errorf("%s joined the pool (%d contacted)", host, n)
		}
		if n, err := a.Join([]string{x.Addr()}); err == nil {
			t.Errorf("the pool joined %s (%d contacted)", host, n)
		}
	}
	time.Sleep(time.Second) // many gossip rounds of the test profile
	for i, n := range []*Node{a, b} {
		if ms := n.Members(); len(ms) != 2 {
			t.Errorf("member %d sees %d members, want 2: %+v", i, len(ms), ms)
		}
		for host := range intruders {
			if logs[i].saw(host, StatusAlive) {
				t.Errorf("member %d heard of %s", i, host)
			}
		}
	}
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, n := range []int{16, 24, 32} {
		want := bytes.Repeat([]byte{byte(n)}, n)
		got, err := ReadKeyFile(write("k", base64.StdEncoding.EncodeToString(want)+"\n"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d-byte key: %x, %v", n, got, err)
		}
	}
	for name, body := range map[string]string{"short": base64.StdEncoding.EncodeToString(make([]byte, 20)), "not base64": "!!!!", "empty": ""} {
		if _, err := ReadKeyFile(write("bad", body)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := Start(Config{Meta: Meta{Role: RoleTarget, Host: "h"}, Key: make([]byte, 8)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("8-byte key: %v, want ErrInvalid", err)
	}
}
