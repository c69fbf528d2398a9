package initiator

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// TestTagPool checks CID allocation: every tag handed out once at a time,
// the generation in the top 4 bits advancing on reuse (so a stale CID never
// equals a live one), get blocking while full and failing on ctx or close.
func TestTagPool(t *testing.T) {
	closed := make(chan struct{})
	p := newTagPool(4, closed)
	ctx := context.Background()
	held := map[uint16]uint16{}
	for i := 0; i < 4; i++ {
		tag, cid, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := held[tag]; dup {
			t.Fatalf("tag %d handed out twice", tag)
		}
		if tagOf(cid) != tag || cid>>tagBits == 0 {
			t.Fatalf("cid 0x%04x for tag %d: want tag in low bits and a nonzero generation", cid, tag)
		}
		held[tag] = cid
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, _, err := p.get(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get on a full pool: err = %v, want deadline exceeded", err)
	}
	p.put(2)
	tag, cid, err := p.get(ctx)
	if err != nil || tag != 2 || cid == held[2] || tagOf(cid) != 2 {
		t.Fatalf("reuse of tag 2: tag %d cid 0x%04x (old 0x%04x) err %v", tag, cid, held[2], err)
	}
	// Sixteen reuses wrap the generation; it never repeats on consecutive uses.
	prev := cid
	for i := 0; i < 40; i++ {
		p.put(2)
		_, c, _ := p.get(ctx)
		if c == prev {
			t.Fatalf("consecutive uses of tag 2 got the same cid 0x%04x", c)
		}
		prev = c
	}
	close(closed)
	if _, _, err := p.get(ctx); !errors.Is(err, errQueueClosed) {
		t.Fatalf("get on a closed, full pool: err = %v", err)
	}
}

// TestTagPoolConcurrent hammers the pool from many goroutines and checks no
// tag is ever held twice.
func TestTagPoolConcurrent(t *testing.T) {
	p := newTagPool(8, make(chan struct{}))
	var mu sync.Mutex
	inUse := map[uint16]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				tag, _, err := p.get(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if inUse[tag] {
					t.Errorf("tag %d held twice", tag)
				}
				inUse[tag] = true
				mu.Unlock()
				mu.Lock()
				inUse[tag] = false
				mu.Unlock()
				p.put(tag)
			}
		}()
	}
	wg.Wait()
}

func TestStatusClasses(t *testing.T) {
	cases := []struct {
		code  pdu.StatusCode
		class error
		retry bool
	}{
		{pdu.SCLBAOutOfRange, blockdev.ErrOutOfRange, false},
		{pdu.SCCapacityExceeded, blockdev.ErrNoSpace, false},
		{pdu.SCInvalidField, blockdev.ErrInvalid, false},
		{pdu.SCInvalidNamespace, blockdev.ErrInvalid, false},
		{pdu.SCReservationConflict, blockdev.ErrFenced, false},
		{pdu.SCNamespaceWriteProtect, blockdev.ErrFenced, false},
		{pdu.SCUnrecoveredReadError, blockdev.ErrCorrupt, false},
		{pdu.SCInternalError, blockdev.ErrUnavailable, false},
		{pdu.SCANAInaccessible, blockdev.ErrUnavailable, true},
		{pdu.SCANAPersistentLoss, blockdev.ErrUnavailable, true},
		{pdu.SCANATransition, blockdev.ErrUnavailable, true},
		{pdu.SCNamespaceNotReady, blockdev.ErrUnavailable, true},
		{pdu.SCInternalPathError, blockdev.ErrUnavailable, true},
	}
	for _, c := range cases {
		err := statusErr("read", pdu.MakeStatus(c.code, true))
		if !errors.Is(err, c.class) {
			t.Errorf("status %v: class %v, want %v", c.code, blockdev.Class(err), c.class)
		}
		if isRetryable(err) != c.retry {
			t.Errorf("status %v: retryable %t, want %t", c.code, isRetryable(err), c.retry)
		}
		var se *StatusError
		if !errors.As(err, &se) || se.Status != c.code || !se.DNR {
			t.Errorf("status %v: StatusError %+v", c.code, se)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	good := Options{SubsysNQN: "nqn.2024-01.io.example:x", Paths: []string{"127.0.0.1:4420"}}
	good.EnsureDefaults()
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if good.IOQueues != 4 || good.QueueDepth != 128 || good.ControllerLossTimeout != 30*time.Second || good.NSID != 1 {
		t.Fatalf("defaults not applied: %+v", good)
	}
	bad := map[string]func(o *Options){
		"no nqn":       func(o *Options) { o.SubsysNQN = "" },
		"no paths":     func(o *Options) { o.Paths = nil },
		"bad path":     func(o *Options) { o.Paths = []string{"127.0.0.1"} },
		"dup path":     func(o *Options) { o.Paths = []string{"127.0.0.1:1", "127.0.0.1:1"} },
		"depth 1":      func(o *Options) { o.QueueDepth = 1 },
		"depth 2000":   func(o *Options) { o.QueueDepth = 2000 },
		"queues 0":     func(o *Options) { o.IOQueues = -1 },
		"kato short":   func(o *Options) { o.KATO = time.Millisecond },
		"nsid all":     func(o *Options) { o.NSID = 0xFFFFFFFF },
		"capsule < -1": func(o *Options) { o.MaxInCapsule = -2 },
		"traddr name":  func(o *Options) { o.HostTraddr = "eth0" },
	}
	for name, mut := range bad {
		o := good
		mut(&o)
		if err := o.Validate(); !errors.Is(err, blockdev.ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := Open(context.Background(), Options{}); !errors.Is(err, blockdev.ErrInvalid) {
		t.Errorf("Open with empty options: %v", err)
	}
}

// TestCapsuleHeaderEncoding checks the allocation-free capsule header
// against pdu.AppendCapsuleCmdHdr.
func TestCapsuleHeaderEncoding(t *testing.T) {
	sqe := pdu.SQE{Opcode: pdu.IOWrite, Flags: pdu.PSDTSGL, CID: 0x1234, NSID: 1, CDW10: 99, CDW12: 7,
		SGL: pdu.SGL{ID: pdu.SGLInCapsule, Length: 4096}}
	for _, dg := range []pdu.Digests{{}, {Header: true}, {Data: true}, {Header: true, Data: true}} {
		for _, n := range []int{0, 512, 4096, 16384} {
			want := pdu.AppendCapsuleCmdHdr([]byte{9}, &sqe, n, dg)
			got := appendCapsuleHdr([]byte{9}, &sqe, n, dg)
			if !bytes.Equal(got, want) {
				t.Fatalf("digests %+v data %d:\n got %x\nwant %x", dg, n, got, want)
			}
		}
	}
}
