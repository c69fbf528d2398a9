package meta

// DefaultSlotSize is the slot size of a cluster initialized without one.
const DefaultSlotSize = 1 << 30
