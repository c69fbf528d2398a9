// Command replay reads the log of a Linux dm-log-writes device and
// replays it onto a file or block device up to a mark, as xfstests'
// replay-log does (Debian does not ship that one): the state a device
// would hold had power been cut at the mark, since dm-log-writes records a
// write only once a flush (or FUA) after it completed. The guest scenario
// test/vmtest/scenarios/dm-log-writes.sh runs it, built static. It is a test
// tool, not part of the nvstripe binary.
//
//	replay -log LOG -list                      print the entries
//	replay -log LOG -replay DEV -end-mark NAME  replay every entry before mark NAME
//
// The log format is Documentation/admin-guide/device-mapper/log-writes.rst:
// a super block (magic, version 1, entry count, sector size) in the first
// sector; then per entry one sector holding its header (sector, sector
// count, flags, data length; a mark's name follows the header) and, unless
// the entry is a discard, its data. Sectors and counts are in the log's
// sector size.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	logPath := flag.String("log", "", "the dm-log-writes log device or a copy of it (required)")
	replay := flag.String("replay", "", "the file or block device to write the replayed entries to")
	endMark := flag.String("end-mark", "", "replay the entries before the mark of this name (with -replay)")
	list := flag.Bool("list", false, "print every entry instead of replaying")
	flag.Parse()
	if err := run(*logPath, *replay, *endMark, *list, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

func run(logPath, replay, endMark string, list bool, out io.Writer) error {
	if logPath == "" || list == (replay != "") || (replay != "") != (endMark != "") {
		return errors.New("usage: replay -log LOG (-list | -replay DEV -end-mark NAME)")
	}
	lf, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	size, err := lf.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	l, err := Open(lf, size)
	if err != nil {
		return err
	}
	if list {
		return l.Scan(func(e Entry) error {
			_, err := fmt.Fprintln(out, e)
			return err
		})
	}
	df, err := os.OpenFile(replay, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	n, err := l.Replay(df, endMark)
	if cerr := df.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "replayed %d entries before mark %q\n", n, endMark)
	return err
}
