package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// TestMapHandshakeFlood: 'map --nbd-listen' under 500 connections from
// 127.0.0.2..5 that stall after the greeting, which used to fill all 128
// places of its listener for the 30 s handshake timeout; a client from
// 127.0.0.6 now completes its handshake and writes and reads the volume
// during the flood.
func TestMapHandshakeFlood(t *testing.T) {
	cl := startMapCluster(t)
	ep := cl.etcd
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testutil.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"map", "v", "--nbd-listen", "127.0.0.1:0", "--etcd", ep}, &out, &errb)
	}()
	waitOutput(t, &out, done, "serving: nbd://")
	nbdAddr := regexp.MustCompile(`serving: nbd://([^/]+)/`).FindStringSubmatch(out.String())[1]
	for i := range 500 {
		nc := testutil.DialFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%4), nbdAddr)
		nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		io.ReadFull(nc, make([]byte, proto.GreetingSize)) // greeted and stalled, or closed
	}
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	c, err := nbdtest.NewClient(hctx, testutil.DialFrom(t, "127.0.0.6", nbdAddr), "v")
	hcancel()
	if err != nil {
		t.Fatalf("client from 127.0.0.6 during the flood: %v", err)
	}
	data := bytes.Repeat([]byte("flood"), 4096/5+1)[:4096]
	got := make([]byte, 4096)
	if err := c.WriteAt(ctx, data, 8192); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadAt(ctx, got, 8192); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back during the flood: %v, equal %t", err, bytes.Equal(got, data))
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("map: %v\n%s", err, errb.String())
	}
}
