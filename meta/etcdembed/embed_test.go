package etcdembed

import (
	"context"
	"testing"
)

// TestWaitEndsWithContext: Wait on a running server returns nil once its
// context ends (an interrupted daemon is no error).
func TestWaitEndsWithContext(t *testing.T) {
	srv, err := Start(context.Background(), Options{Dir: t.TempDir(), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Wait(ctx); err != nil {
		t.Errorf("Wait after cancel: %v, want nil", err)
	}
}
