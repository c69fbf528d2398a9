package decide

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid marks bad input to Decide or a bad Config (errors.Is).
var ErrInvalid = errors.New("controller: invalid input")

// Config tunes Decide. Zero fields take their defaults.
type Config struct {
	// OutAfter: a namespace down this long is marked out. Default 10m
	// (`nvstripe controller --out-after`).
	OutAfter time.Duration
	// MaxMoves caps the moves in flight in the whole cluster. Default 32.
	MaxMoves int
	// MaxMovesPerNS caps the moves in flight that write to, or copy from,
	// one namespace. Reconstruction reads are spread over the k survivors
	// and are not counted (the movers' pacer meters their bytes). Default 2.
	MaxMovesPerNS int
	// StallAfter: a move with no progress report (Move.Updated, else
	// Move.Started) for this long is aborted, so that a crashed mover's
	// work is re-planned. Default 15m; negative disables.
	StallAfter time.Duration
	// DomainLabel is the host label that names failure domains ("rack");
	// empty means each host is its own domain. Default "".
	DomainLabel string
	// Seed varies placement choices between clusters. Default 0.
	Seed uint64
	// MinUpFraction: namespaces are marked out only while at least this
	// fraction of the hosts with namespaces in service are up (see
	// HoldOut). Default 0.5; negative: no guard.
	MinUpFraction float64
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.OutAfter == 0 {
		c.OutAfter = 10 * time.Minute
	}
	if c.MaxMoves == 0 {
		c.MaxMoves = 32
	}
	if c.MaxMovesPerNS == 0 {
		c.MaxMovesPerNS = 2
	}
	if c.StallAfter == 0 {
		c.StallAfter = 15 * time.Minute
	}
	if c.MinUpFraction == 0 {
		c.MinUpFraction = 0.5
	}
}

// Validate reports a Config that EnsureDefaults cannot mend.
func (c *Config) Validate() error {
	if c.MinUpFraction > 1 {
		return fmt.Errorf("controller config: MinUpFraction %g above 1: %w", c.MinUpFraction, ErrInvalid)
	}
	if c.OutAfter < 0 || c.MaxMoves < 0 || c.MaxMovesPerNS < 0 {
		return fmt.Errorf("controller config: negative OutAfter, MaxMoves or MaxMovesPerNS in %+v: %w", *c, ErrInvalid)
	}
	return nil
}
