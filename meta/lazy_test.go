package meta_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
)

// TestLazy checks a Lazy retries a failed open, opens once, and Close
// closes what it opened.
func TestLazy(t *testing.T) {
	eps := metatest.Start(t)
	calls, fail := 0, true
	l := meta.NewLazy(func(ctx context.Context) (*meta.Store, error) {
		calls++
		if fail {
			return nil, errors.New("etcd away")
		}
		return meta.Open(ctx, meta.Config{Endpoints: eps})
	})
	ctx := context.Background()
	if _, err := l.Open(ctx); err == nil {
		t.Fatal("open that fails succeeded")
	}
	fail = false
	s1, err := l.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := l.Open(ctx)
	if err != nil || s1 != s2 || calls != 2 {
		t.Fatalf("second open: %p %p %v after %d calls, want the same store after 2", s1, s2, err, calls)
	}
	l.Close()
	if _, err := s1.Hosts(ctx); err == nil {
		t.Fatal("store still usable after Close")
	}
}
