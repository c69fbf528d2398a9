package volume

import (
	"fmt"
	"strings"

	"github.com/nvstripe/nvstripe/blockdev"
)

// StripeError reports a stripe (or, with Stripe -1, a segment) with more
// shards missing than the layout tolerates. Its class is
// blockdev.ErrUnavailable: the data may come back with the namespaces.
type StripeError struct {
	Segment, Stripe int64
	Missing         []string // namespaces of the missing shards
	M, N            int
}

func (e *StripeError) Error() string {
	where := fmt.Sprintf("segment %d stripe %d", e.Segment, e.Stripe)
	if e.Stripe < 0 {
		where = fmt.Sprintf("segment %d", e.Segment)
	}
	return fmt.Sprintf("%s: %d of %d shards unavailable (namespaces %s), at most %d tolerated; bring a namespace back or restore from backup",
		where, len(e.Missing), e.N, strings.Join(e.Missing, ", "), e.M)
}

func (e *StripeError) Unwrap() error { return blockdev.ErrUnavailable }
