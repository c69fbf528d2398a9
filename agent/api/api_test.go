package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nvstripe/nvstripe/internal/rpctest"
)

// fake is a Server that records requests and fails on demand.
type fake struct {
	UnimplementedAgentServer
	got *MapRequest
	err error
}

func (f *fake) Map(_ context.Context, r *MapRequest) (*MapReply, error) {
	f.got = r
	if f.err != nil {
		return nil, Status(f.err)
	}
	return &MapReply{Mapping: &Mapping{Volume: r.Volume, State: StateServing, Url: "nbd://x/" + r.Volume,
		Stats: &Stats{ReadBytes: 7, NamespaceErrors: map[string]int64{"h1-n1": 2}}}}, nil
}

func (f *fake) Unmap(context.Context, *UnmapRequest) (*UnmapReply, error) {
	return nil, Status(fmt.Errorf("volume x is not mapped: %w", ErrNotFound))
}

func (f *fake) List(context.Context, *ListRequest) (*ListReply, error) {
	return &ListReply{Mappings: []*Mapping{{Volume: "a"}, {Volume: "b"}}}, nil
}

func (f *fake) Status(context.Context, *StatusRequest) (*StatusReply, error) {
	return &StatusReply{Holder: "h", Started: timestamppb.New(time.Unix(1, 0)), Mappings: map[string]int64{StateServing: 2}}, nil
}

func serveFake(t *testing.T, f *fake) *Client {
	sock := filepath.Join(t.TempDir(), "a.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(f)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRoundTrip(t *testing.T) {
	f := &fake{}
	c := serveFake(t, f)
	ctx := context.Background()
	want := &MapRequest{Volume: "v", NbdListen: "127.0.0.1:1", ReadOnly: true}
	rep, err := c.Map(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(f.got, want) {
		t.Errorf("server got %v, want %v", f.got, want)
	}
	if m := rep.Mapping; m.Url != "nbd://x/v" || m.Stats.ReadBytes != 7 || m.Stats.NamespaceErrors["h1-n1"] != 2 {
		t.Errorf("reply %+v", m)
	}
	l, err := c.List(ctx, &ListRequest{})
	if err != nil || len(l.Mappings) != 2 || l.Mappings[1].Volume != "b" {
		t.Errorf("list %+v, %v", l, err)
	}
	st, err := c.Status(ctx, &StatusRequest{})
	if err != nil || st.Holder != "h" || !st.Started.AsTime().Equal(time.Unix(1, 0)) || st.Mappings[StateServing] != 2 {
		t.Errorf("status %+v, %v", st, err)
	}
}

func TestErrorClasses(t *testing.T) {
	f := &fake{}
	c := serveFake(t, f)
	ctx := context.Background()
	_, err := c.Unmap(ctx, &UnmapRequest{Volume: "x"})
	var e *Error
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &e) || e.Code != codes.NotFound || err.Error() != "volume x is not mapped: not found" {
		t.Errorf("unmap: %v", err)
	}
	for _, class := range []error{ErrExists, ErrInvalid, ErrBusy, ErrUnsupported} {
		f.err = fmt.Errorf("because: %w", class)
		if _, err := c.Map(ctx, &MapRequest{Volume: "v"}); !errors.Is(err, class) || err.Error() != f.err.Error() {
			t.Errorf("map failing with %v: got %v", f.err, err)
		}
	}
	f.err = errors.New("something else")
	if _, err := c.Map(ctx, &MapRequest{Volume: "v"}); !errors.As(err, &e) || e.Code != codes.Internal {
		t.Errorf("unclassified error: %v", err)
	}
}

func TestNoAgent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.List(context.Background(), &ListRequest{})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "is `nvstripe agent` running?") || !strings.Contains(err.Error(), sock) {
		t.Errorf("no agent: %v", err)
	}
}

// TestStandardServices checks that the server lists the Agent service
// through reflection (what `grpcurl -unix SOCKET list` asks) and answers
// health checks.
func TestStandardServices(t *testing.T) {
	c := serveFake(t, &fake{})
	rpctest.CheckStandard(t, c.Conn(), ServiceName)
}
