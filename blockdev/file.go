package blockdev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"
)

// DirectMode says whether a File uses O_DIRECT (bypassing the page cache).
type DirectMode uint8

const (
	// DirectAuto uses O_DIRECT when the file system accepts it for the
	// File's block size, and buffered IO otherwise (File.DirectReason says
	// why).
	DirectAuto DirectMode = iota
	// DirectOff always uses buffered IO.
	DirectOff
	// DirectRequired fails OpenFile when O_DIRECT cannot be used.
	DirectRequired
)

// FileOptions configures OpenFile. The zero value (or nil) opens an existing
// file or block device at its own size with a 4096-byte block size and
// O_DIRECT where possible.
type FileOptions struct {
	// Size is the device size in bytes, a multiple of BlockSize. A missing
	// file is created with this size. An existing regular file must have it
	// (see Grow); a block device must hold at least Size bytes and is then
	// used up to Size. Default 0: the existing file's or block device's
	// size, and a missing file is an error.
	Size int64
	// BlockSize is the logical block size, a power of two from 512 to 4096.
	// Default 4096.
	BlockSize int
	// Grow lets OpenFile extend an existing regular file smaller than Size.
	// Default false: a file of another size is an error. A file is never
	// shrunk.
	Grow bool
	// Sparse leaves new space of a created or grown file unallocated.
	// Default false: the space is reserved with fallocate where the file
	// system supports it (it still reads as zeros).
	Sparse bool
	// NoCreate makes a missing file an error even when Size is set.
	// Default false.
	NoCreate bool
	// Direct selects O_DIRECT. Default DirectAuto.
	Direct DirectMode
	// NoMap turns off IO through a memory mapping (see File). Default
	// false: a regular file on tmpfs is read and written through one.
	NoMap bool
}

// File is a Device over a regular file or a block device.
//
// Flush is fdatasync. WriteAtFUA makes one write durable alone (pwritev2
// with RWF_DSYNC: a FUA write on a block device); on tmpfs it is a write.
// Trim punches a hole (block devices: zero-out with
// unmap) and WriteZeroes zeroes the range in place (FALLOC_FL_ZERO_RANGE or
// BLKZEROOUT); both fall back to writing zeros where the system lacks the
// call, and WriteZeroes of a regular file punches a hole when the file
// system has no space to zero in place. Allocated reports data extents with SEEK_DATA/SEEK_HOLE (regular
// files on Linux; the whole range elsewhere).
//
// With O_DIRECT, callers' buffers that are not aligned to the block size go
// through aligned bounce buffers; aligned ones are used as they are.
//
// A regular file on tmpfs (Linux), whose memory is its page cache, is
// read and written through a shared memory mapping: an IO is one copy to
// or from the file's pages, without pread's and pwrite's per-page lookup
// and locking, or the inode lock that makes concurrent writes to one file
// wait for each other. A read of a range with a page not in memory (a
// hole, or swapped out; mincore says) goes to pread, which reads holes as
// zeros without allocating them, so a sparse file stays sparse. An IO
// that faults (tmpfs has no page to give, or the file was shrunk behind
// the File's back) is done again with pread or pwrite, which report why.
// Mapped returns whether the File has a mapping; FileOptions.NoMap turns
// it off.
//
// Errors of the system map to classes as follows:
//   - EIO on a read: ErrCorrupt (a media error; rewriting the range usually
//     repairs it, and a device that is gone fails the rewrite).
//   - EIO on a write, flush, trim or zeroing: ErrUnavailable (the data did
//     not reach the medium; after a failed fdatasync the page cache may
//     have dropped it, so retrying proves nothing).
//   - ENODATA (critical medium error) and EILSEQ (integrity check):
//     ErrCorrupt. EBADE (reservation conflict): ErrFenced.
//   - ENOSPC and EDQUOT (the file system or quota is full, typically a
//     sparse file that needs a block): ErrNoSpace; the file stays usable.
//   - EINVAL: ErrInvalid. A closed File, a file shorter than Size, and
//     every other error: ErrUnavailable.
//
// Context arguments are checked once at the start of a call.
type File struct {
	f        *os.File
	path     string
	size     int64
	bs       int
	blockDev bool
	direct   bool
	reason   string // why direct is false
	closed   atomic.Bool
	bounce   sync.Pool // *[]byte of bounceSize bytes, aligned to dioAlign

	memMu sync.RWMutex // held shared while writing through mem; Close unmaps under it
	mem   []byte       // the file mapped (tmpfs), or nil
}

var (
	_ Device             = (*File)(nil)
	_ AllocationReporter = (*File)(nil)
	_ Lender             = (*File)(nil)
	_ FUAWriter          = (*File)(nil)
)

// dioAlign is the memory alignment of O_DIRECT buffers: the largest logical
// block size, so that it suits any device.
const dioAlign = 4096

// bounceSize is the size of a bounce buffer; larger requests go through it
// in pieces.
const bounceSize = 1 << 20

// OpenFile opens (or creates) the file or block device at path as a Device.
// A nil opts means the zero FileOptions.
func OpenFile(path string, opts *FileOptions) (*File, error) {
	var o FileOptions
	if opts != nil {
		o = *opts
	}
	if o.BlockSize == 0 {
		o.BlockSize = 4096
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("file %s: %w", path, err)
	}
	fl, err := openFile(path, &o)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", path, err)
	}
	return fl, nil
}

func (o *FileOptions) validate() error {
	bs := o.BlockSize
	if bs < 512 || bs > 4096 || bs&(bs-1) != 0 {
		return fmt.Errorf("block size %d is not a power of two from 512 to 4096: %w", bs, ErrInvalid)
	}
	if o.Size < 0 || o.Size%int64(bs) != 0 {
		return fmt.Errorf("size %d is not a non-negative multiple of block size %d: %w", o.Size, bs, ErrInvalid)
	}
	if o.Direct > DirectRequired {
		return fmt.Errorf("unknown direct mode %d: %w", o.Direct, ErrInvalid)
	}
	return nil
}

// openFile does the work of OpenFile; errors are not yet prefixed with path.
func openFile(path string, o *FileOptions) (*File, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && o.Size > 0 && !o.NoCreate:
		if err := createFile(path, o); err != nil {
			return nil, err
		}
		return openExisting(path, o)
	case err != nil:
		return nil, err
	case st.Mode().IsRegular() || st.Mode()&fs.ModeDevice != 0 && st.Mode()&fs.ModeCharDevice == 0:
		return openExisting(path, o)
	}
	return nil, fmt.Errorf("not a regular file or block device (mode %v): %w", st.Mode(), ErrInvalid)
}

// createFile creates path with o.Size bytes, preallocated unless o.Sparse.
func createFile(path string, o *FileOptions) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = resize(f, 0, o)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// resize extends f from size from to o.Size, reserving the new space unless
// o.Sparse.
func resize(f *os.File, from int64, o *FileOptions) error {
	if err := f.Truncate(o.Size); err != nil {
		return err
	}
	if o.Sparse {
		return nil
	}
	err := fileFallocate(f, fallocReserve, from, o.Size-from)
	if errors.Is(err, errUnsupported) {
		return nil // stays sparse
	}
	return err
}

// openExisting opens path (which exists), sizes it and chooses the IO mode.
func openExisting(path string, o *FileOptions) (*File, error) {
	fl := &File{path: path, bs: o.BlockSize}
	f, err := fl.openMode(o)
	if err != nil {
		return nil, err
	}
	fl.f = f
	fl.bounce.New = func() any { b := alignedBuf(bounceSize); return &b }
	if err := fl.setSize(o); err != nil {
		f.Close()
		return nil, err
	}
	if fl.direct {
		if err := fl.probeDirect(o); err != nil {
			f.Close()
			return nil, err
		}
	}
	if !fl.blockDev && !o.NoMap && fl.size > 0 {
		// Not mapped (not tmpfs, or mmap refused): pwrite does it all.
		fl.mem, _ = mapTmpfs(fl.f, fl.size)
	}
	return fl, nil
}

// openMode opens the file with O_DIRECT when o allows and the system accepts
// it, recording the reason when it does not.
func (fl *File) openMode(o *FileOptions) (*os.File, error) {
	flag, ok := directFlag()
	if o.Direct == DirectOff {
		fl.reason = "O_DIRECT turned off by FileOptions.Direct"
		return os.OpenFile(fl.path, os.O_RDWR, 0)
	}
	if !ok {
		fl.reason = "O_DIRECT is not supported on this system"
	} else {
		f, err := os.OpenFile(fl.path, os.O_RDWR|flag, 0)
		if err == nil {
			fl.direct = true
			return f, nil
		}
		fl.reason = fmt.Sprintf("open with O_DIRECT failed: %v", err.Error())
	}
	if o.Direct == DirectRequired {
		return nil, fmt.Errorf("%s: %w", fl.reason, ErrInvalid)
	}
	return os.OpenFile(fl.path, os.O_RDWR, 0)
}

// setSize sets fl.size and fl.blockDev from the file and o, growing a
// regular file when o allows.
func (fl *File) setSize(o *FileOptions) error {
	st, err := fl.f.Stat()
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeDevice != 0 {
		return fl.setBlockDevSize(o)
	}
	cur := st.Size()
	switch {
	case o.Size == 0 && cur%int64(fl.bs) != 0:
		return fmt.Errorf("file size %d is not a multiple of block size %d: %w", cur, fl.bs, ErrInvalid)
	case o.Size == 0 || o.Size == cur:
		fl.size = cur
		return nil
	case o.Size > cur && o.Grow:
		fl.size = o.Size
		return resize(fl.f, cur, o)
	}
	return fmt.Errorf("file holds %d bytes, want %d (set Grow to extend; files are never shrunk): %w", cur, o.Size, ErrInvalid)
}

func (fl *File) setBlockDevSize(o *FileOptions) error {
	fl.blockDev = true
	n, err := blockDevSize(fl.f)
	if err != nil {
		return fmt.Errorf("block device size: %w", err)
	}
	if o.Size > n {
		return fmt.Errorf("block device holds %d bytes, want %d: %w", n, o.Size, ErrInvalid)
	}
	fl.size = o.Size
	if fl.size == 0 {
		fl.size = n - n%int64(fl.bs)
	}
	return nil
}

// probeDirect checks that the file system takes O_DIRECT reads of one block;
// if not, it reopens the file buffered (or fails under DirectRequired).
func (fl *File) probeDirect(o *FileOptions) error {
	if fl.size == 0 {
		return nil
	}
	_, err := fl.f.ReadAt(alignedBuf(fl.bs), fl.size-int64(fl.bs))
	if err == nil {
		return nil
	}
	if o.Direct == DirectRequired {
		return fmt.Errorf("O_DIRECT read of %d bytes failed: %w", fl.bs, Mark(err, ErrInvalid))
	}
	fl.reason = fmt.Sprintf("O_DIRECT read of %d bytes failed: %v", fl.bs, err.Error())
	f, err := os.OpenFile(fl.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	fl.f.Close()
	fl.f, fl.direct = f, false
	return nil
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// alignedBuf returns n bytes whose address is a multiple of dioAlign.
func alignedBuf(n int) []byte {
	b := make([]byte, n+dioAlign)
	skip := (dioAlign - int(addrOf(b)%dioAlign)) % dioAlign
	return b[skip : skip+n : skip+n]
}

// Path returns the path the File was opened with.
func (fl *File) Path() string { return fl.path }

// Direct reports whether the File uses O_DIRECT.
func (fl *File) Direct() bool { return fl.direct }

// DirectReason says why the File does not use O_DIRECT ("" when it does).
func (fl *File) DirectReason() string {
	if fl.direct {
		return ""
	}
	return fl.reason
}

// Mapped reports whether the File does its IO through a memory mapping.
func (fl *File) Mapped() bool { return fl.mem != nil }

// IsBlockDevice reports whether the File is a block device.
func (fl *File) IsBlockDevice() bool { return fl.blockDev }

func (fl *File) Size() int64    { return fl.size }
func (fl *File) BlockSize() int { return fl.bs }

// Close closes the file; it is safe to call more than once.
func (fl *File) Close() error {
	if fl.closed.Swap(true) {
		return nil
	}
	fl.memMu.Lock()
	if fl.mem != nil {
		unmap(fl.mem)
		fl.mem = nil
	}
	fl.memMu.Unlock()
	if err := fl.f.Close(); err != nil {
		return fmt.Errorf("file %s: close: %w", fl.path, Mark(err, ErrUnavailable))
	}
	return nil
}
