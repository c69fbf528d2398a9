// Package metatest starts an embedded etcd on free 127.0.0.1 ports for
// tests, with fast timing and no fsync, stopped when the test ends.
package metatest

import (
	"context"
	"testing"

	"github.com/nvstripe/nvstripe/meta/embed"
)

// Start starts an etcd server for t and returns its client endpoints. The
// server and its data directory are removed when t ends.
func Start(t testing.TB) []string {
	t.Helper()
	return StartServer(t).Endpoints()
}

// StartServer is Start returning the server itself (to stop it early and
// test what clients do when etcd goes away).
func StartServer(t testing.TB) *embed.Server {
	t.Helper()
	s, err := embed.Start(context.Background(), embed.Options{Dir: t.TempDir(), Fast: true})
	if err != nil {
		t.Fatalf("metatest: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
