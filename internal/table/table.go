// Package table is the one style of the command line's text tables: cells
// separated by tabs, columns padded with two spaces. New aligns cells left
// (names, states), NewRight right (columns of numbers). It writes only to
// the io.Writer it is given; a Writer is used by one goroutine.
package table

import (
	"io"
	"text/tabwriter"
)

// New returns a table writer whose cells align left; Flush writes the
// table.
func New(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// NewRight returns a table writer whose cells align right (end each line
// with a tab so that the last column aligns too).
func NewRight(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
}
