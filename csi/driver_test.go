package csi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nvstripe/nvstripe/capacity"
	"github.com/nvstripe/nvstripe/meta"
)

// TestGRPCError: a wrapped error class gets its CSI code, an error with a
// code keeps it, any other error is Internal.
func TestGRPCError(t *testing.T) {
	if grpcError(nil) != nil {
		t.Fatal("nil became an error")
	}
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("volume v: %w", meta.ErrNotFound), codes.NotFound},
		{fmt.Errorf("txn: %w", meta.ErrConflict), codes.Unavailable},
		{fmt.Errorf("create: %w", capacity.ErrOvercommitted), codes.ResourceExhausted},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{status.Error(codes.Aborted, "busy"), codes.Aborted},
		{errors.New("something else"), codes.Internal},
	} {
		if got := status.Code(grpcError(tc.err)); got != tc.want {
			t.Errorf("%v: code %v, want %v", tc.err, got, tc.want)
		}
	}
}
