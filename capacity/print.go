package capacity

import (
	"fmt"
	"io"

	"github.com/nvstripe/nvstripe/internal/table"
	"github.com/nvstripe/nvstripe/internal/units"
)

// WriteTable prints r for people: one row per failure domain and a total,
// sizes in binary units, then the data bytes and the overcommit.
func WriteTable(w io.Writer, r *Report, limit float64) error {
	tw := table.NewRight(w)
	fmt.Fprintln(tw, "DOMAIN\tNAMESPACES\tRAW\tUSABLE\tALLOCATED\tPROMISED\t")
	row := func(name string, n int, raw, usable, alloc, promised int64) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", name, n, units.FormatSize(raw), units.FormatSize(usable),
			units.FormatSize(alloc), units.FormatSize(promised))
	}
	n := 0
	for _, d := range r.Domains {
		row(d.Domain, d.Namespaces, d.Raw, d.Usable, d.Allocated, d.Promised)
		n += d.Namespaces
	}
	row("total", n, r.Raw, r.Usable, r.Allocated, r.Promised)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nusable for %s volumes: %s of data; volumes promise %s of data (%s after parity)\n"+
		"overcommit %.2f (promised / usable), limit %g\n", r.Layout, units.FormatSize(r.UsableData),
		units.FormatSize(r.PromisedData), units.FormatSize(r.Promised), r.Overcommit, limit)
	return err
}
