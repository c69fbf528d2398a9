package api

import (
	"fmt"
	"io"

	"github.com/nvstripe/nvstripe/internal/table"
	"github.com/nvstripe/nvstripe/internal/units"
)

// WriteMappings prints mappings as a table for people (sizes in binary
// units).
func WriteMappings(out io.Writer, ms []*Mapping) error {
	w := table.New(out)
	fmt.Fprintln(w, "VOLUME\tSTATE\tURL\tEPOCH\tREAD\tWRITTEN\tERRORS\tDEGRADED\tNOTE")
	for _, m := range ms {
		url := m.Url
		if url == "" {
			url = m.Via + " " + m.Where
		}
		if m.ReadOnly {
			url += " (ro)"
		}
		s := m.GetStats()
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", m.Volume, m.State, url, m.Epoch,
			units.FormatSize(s.GetReadBytes()), units.FormatSize(s.GetWriteBytes()), s.GetErrors(), s.GetDegraded(), m.Error)
	}
	return w.Flush()
}
