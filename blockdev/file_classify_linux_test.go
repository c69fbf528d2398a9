package blockdev

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
)

func TestClassifyLinux(t *testing.T) {
	wrap := func(e error) error { return &os.PathError{Op: "pread", Path: "x", Err: e} }
	for _, c := range []struct {
		err  error
		read bool
		want error
	}{
		{wrap(syscall.EIO), true, ErrCorrupt},
		{wrap(syscall.EIO), false, ErrUnavailable},
		{wrap(syscall.ENODATA), false, ErrCorrupt},
		{wrap(syscall.EILSEQ), true, ErrCorrupt},
		{wrap(syscall.EBADE), false, ErrFenced},
		{wrap(syscall.EINVAL), true, ErrInvalid},
		{wrap(syscall.ENOSPC), false, ErrNoSpace},
		{wrap(syscall.EDQUOT), false, ErrNoSpace},
		{wrap(syscall.ENODEV), true, ErrUnavailable},
		{wrap(syscall.ENOLINK), true, ErrUnavailable},
		{os.ErrClosed, true, ErrUnavailable},
		{io.EOF, true, ErrUnavailable},
		{errors.New("something else"), false, ErrUnavailable},
	} {
		if got := classify(c.err, c.read); got != c.want {
			t.Errorf("classify(%v, read=%v) = %v, want %v", c.err, c.read, got, c.want)
		}
		// fail keeps the system error and adds the class.
		fl := &File{path: "p"}
		op := "write"
		if c.read {
			op = "read"
		}
		got := fl.fail(op, 0, 4096, c.err)
		if !errors.Is(got, c.want) || !errors.Is(got, c.err) {
			t.Errorf("fail(%v) = %v: lost the class or the cause", c.err, got)
		}
	}
}
