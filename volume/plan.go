package volume

import (
	"github.com/nvstripe/nvstripe/volume/layout"
)

// writeMode is how a stripe write keeps parity right.
type writeMode int

const (
	// modeFull: the write covers the stripe; parity is encoded from it.
	modeFull writeMode = iota
	// modeDataOnly: no parity to maintain (M == 0, or every parity shard
	// missing); only the data is written.
	modeDataOnly
	// modeDelta: read the old data of the written shards and the old parity,
	// apply the difference to the parity.
	modeDelta
	// modeReconstructWrite: read the data shards the write does not cover and
	// encode the parity afresh.
	modeReconstructWrite
	// modeRebuild: a written data shard is missing; reconstruct all data over
	// the span from any K shards, overlay the write, encode the parity.
	modeRebuild
)

func (m writeMode) String() string {
	return [...]string{"full", "data-only", "delta", "reconstruct-write", "rebuild"}[m]
}

// writePlan is what one stripe write reads and writes. Shard indexes are
// stripe positions (0..K-1 data, K.. parity); reads and parity writes cover
// the span [Lo, Hi) of the chunk; data writes cover the pieces.
type writePlan struct {
	Mode   writeMode
	Lo, Hi int64
	Reads  []int // shards to read over the span
	Writes []int // shards to write (data: their piece; parity: the span)
	Skip   []int // shards the write should reach but cannot (missing)
}

// planWrite decides how to write sio given which shards are usable. It is pure.
// It returns ok=false when fewer than K shards are usable: the stripe cannot
// take a write without losing data.
func planWrite(g layout.Geometry, sio layout.StripeIO, usable []bool) (writePlan, bool) {
	if count(usable) < g.K {
		return writePlan{}, false
	}
	mod := make([]bool, g.K) // data shards the write touches
	for _, p := range sio.Pieces {
		mod[p.Shard] = true
	}
	var p writePlan
	p.Lo, p.Hi = sio.Span()
	for s := 0; s < g.N(); s++ {
		if s >= g.K || mod[s] {
			if usable[s] {
				p.Writes = append(p.Writes, s)
			} else {
				p.Skip = append(p.Skip, s)
			}
		}
	}
	parity := count(usable[g.K:])
	switch {
	case sio.Full(g):
		p.Mode, p.Lo, p.Hi = modeFull, 0, g.Chunk
	case parity == 0:
		p.Mode = modeDataOnly
	case !allUsable(mod, usable):
		p.Mode, p.Reads = modeRebuild, pickK(g, usable)
	default:
		p.Mode, p.Reads = cheaperRMW(g, sio, mod, usable, p.Lo, p.Hi)
	}
	return p, true
}

// cheaperRMW picks delta update or reconstruct-write, whichever reads fewer
// shards (delta on a tie: it reads the parity it then overwrites).
func cheaperRMW(g layout.Geometry, sio layout.StripeIO, mod, usable []bool, lo, hi int64) (writeMode, []int) {
	var delta, recon []int
	reconOK := true
	for s := 0; s < g.K; s++ {
		if mod[s] {
			delta = append(delta, s)
		}
		if !covers(sio, s, lo, hi) {
			recon = append(recon, s)
			reconOK = reconOK && usable[s]
		}
	}
	for s := g.K; s < g.N(); s++ {
		if usable[s] {
			delta = append(delta, s)
		}
	}
	if reconOK && len(recon) < len(delta) {
		return modeReconstructWrite, recon
	}
	return modeDelta, delta
}

// covers reports whether the write covers data shard s over all of [lo, hi).
func covers(sio layout.StripeIO, s int, lo, hi int64) bool {
	for _, p := range sio.Pieces {
		if p.Shard == s {
			return p.Off <= lo && p.Off+p.Len >= hi
		}
	}
	return false
}

// pickK returns K usable shards, data shards first.
func pickK(g layout.Geometry, usable []bool) []int {
	out := make([]int, 0, g.K)
	for s := 0; s < g.N() && len(out) < g.K; s++ {
		if usable[s] {
			out = append(out, s)
		}
	}
	return out
}

func count(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

func allUsable(mod, usable []bool) bool {
	for s, m := range mod {
		if m && !usable[s] {
			return false
		}
	}
	return true
}

// readMode is how a stripe read gets its pieces.
type readMode int

const (
	// readDirect: every piece's shard is usable; read the pieces.
	readDirect readMode = iota
	// readReconstruct: a piece's shard is missing; read K usable shards over
	// the span and reconstruct the missing ones.
	readReconstruct
)

func (m readMode) String() string { return [...]string{"direct", "reconstruct"}[m] }

// readPlan is what one stripe read reads. A direct plan reads the pieces
// and carries nothing else (the hot path allocates nothing); a reconstruct
// plan reads Reads over the span [Lo, Hi) of the chunk and rebuilds Rebuild
// (the pieces' missing shards) from them.
type readPlan struct {
	Mode    readMode
	Lo, Hi  int64
	Reads   []int // reconstruct: K usable shards, data shards first
	Rebuild []int // reconstruct: the pieces' shards that are not usable
	// Spare (reconstruct) are the usable shards not in Reads, parity
	// first: what a hedged read (hedge.go) reads when one of Reads is slow.
	Spare []int
}

// planRead decides how to read sio given which shards are usable. It is
// pure. It returns ok=false when a piece's shard is missing and fewer than K
// shards are usable: the data cannot be read.
func planRead(g layout.Geometry, sio layout.StripeIO, usable []bool) (readPlan, bool) {
	var p readPlan
	for _, pc := range sio.Pieces {
		if !usable[pc.Shard] {
			p.Rebuild = append(p.Rebuild, pc.Shard)
		}
	}
	if len(p.Rebuild) == 0 {
		return readPlan{Mode: readDirect}, true
	}
	if count(usable) < g.K {
		return readPlan{}, false
	}
	p.Mode, p.Reads = readReconstruct, pickK(g, usable)
	p.Spare = spares(g, usable, p.Reads)
	p.Lo, p.Hi = sio.Span()
	return p, true
}

// spares returns the usable shards not in reads, parity shards first.
func spares(g layout.Geometry, usable []bool, reads []int) []int {
	var out []int
	for i := range g.N() {
		sh := (g.K + i) % g.N() // K..N-1, then 0..K-1
		if usable[sh] && !contains(reads, sh) {
			out = append(out, sh)
		}
	}
	return out
}
