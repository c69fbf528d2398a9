package blockdev

// coldCopyMin is the size from which copyCold uses non-temporal stores:
// below it the destination lines are few and the ordinary copy's cost of
// reading them first is small.
const coldCopyMin = 64 << 10
