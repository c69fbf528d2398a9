// Package fuse shows block devices as regular files in a FUSE mount: each
// blockdev.Device of Mount's map becomes DIR/NAME, a file of the device's
// size, which losetup, mkfs and mount can use like a disk image. It is the
// way to get a real block device where the kernel has no nbd driver
// (losetup --direct-io=on DIR/NAME).
//
// Files are opened in direct IO mode (FOPEN_DIRECT_IO with
// FOPEN_PARALLEL_DIRECT_WRITES, CAP_ASYNC_DIO): the kernel keeps no page
// cache for them and sends many reads and writes in parallel, up to 1 MiB
// each. Requests that are not aligned to the device's block size (buffered
// IO can send them) are served by reading the blocks they touch, patching
// them and writing them back, under a lock that orders such
// read-modify-writes against every other write to that file (aligned writes
// take it shared and run in parallel).
//
// Semantics: fsync and fdatasync call Device.Flush; fallocate with
// FALLOC_FL_PUNCH_HOLE calls Device.Trim on the whole blocks and zeroes the
// partial ones, FALLOC_FL_ZERO_RANGE calls Device.WriteZeroes the same way,
// plain fallocate inside the file succeeds without doing anything. The size
// is the device's: truncating to another size fails with EINVAL, writes at
// or past the end fail with ENOSPC (a write crossing the end is cut short).
// A device that grows must be announced with FS.Resized, or the kernel shows
// the old size for up to a minute (it caches attributes). Device
// errors map to EIO, except blockdev.ErrFenced (EPERM), ErrNoSpace (ENOSPC)
// and ErrOutOfRange (ENOSPC for writes, EINVAL otherwise).
//
// Mounting needs root (mount(2) directly, no fusermount) and /dev/fuse; it
// is implemented for Linux only.
//
// Concurrency: the FS serves kernel requests from many goroutines at once;
// the devices must allow that (blockdev.Device does). FS methods may be
// called from any goroutine.
package fuse
